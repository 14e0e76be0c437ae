import type { Ddl } from '@shardflake/core'
import { asDdl } from './ddl'
import {
  type PostgresSqlOptions,
  type ResolvedSqlOptions,
  resolveSqlOptions,
  SQL_VERSION,
  shardContext,
} from './options'

/**
 * The SQL that fences a logical shard in the database it is moving away from: afterwards that
 * database never issues another ID of the shard, and `<schema>.shards.fence_value` holds L, the
 * highest sequence value it can ever have issued. The new home must then continue above L
 * (`_advance_to(L)`); `movePostgresShards` does both. Run it in one transaction, after the common SQL of
 * this version (it uses the `retired_at`, `moved_to` and `fence_value` columns).
 *
 * In order: `ALTER SEQUENCE` on `id_gen`, then `id_seq` (the order draws take them) takes the
 * locks that block every `nextval`/`setval` of the shard until commit and waits for transactions
 * that drew from it; the last value is read, `MAXVALUE` set to L (the last value plus `marginMs`
 * of ID space, never below an earlier fence; if the value moved in between, it is read again);
 * `id_gen` is set to "not called" (draws already running see a move that never ends); the row in
 * `shards` is marked retired; and `next_id()`, `next_ids(n)` and every helper that draws, moves
 * the sequence or composes an ID are replaced by versions that raise SQLSTATE `SF005` ("logical
 * shard n moved to another database") before touching it. A call that was already running the old
 * body when the fence committed fails at its next step, with SF005 or, if it reaches the sequence
 * first, the sequence's own 2200H/22003 at L. Idempotent: on a fenced shard it keeps L.
 *
 * @example
 * ```ts
 * // What movePostgresShards runs on the old home (plus a lock_timeout and the destination's name):
 * await client.query(`BEGIN; ${fenceSql({ sharding }, 5).script} COMMIT;`)
 * ```
 */
export function fenceSql(options: PostgresSqlOptions, shard: number): Ddl {
  return asDdl(fenceScript(resolveSqlOptions(options, { where: 'fenceSql options' }), shard))
}

/** {@link fenceSql} as one script. @internal */
export function fenceScript(o: ResolvedSqlOptions, shard: number): string {
  const { n, name, s, c, seq, gen } = shardContext(o, shard)
  // Room above the last value, `marginMs` of ID space: a call already running the old body when
  // the fence commits (a statement planned with the inlined next_id(), a reservation waiting for
  // the lock) takes its values within it and then fails in a fenced helper with SF005, rather
  // than at the sequence's end. The new home's IDs start that much later (ahead of the clock).
  const headroom = n.margin
  // Everything that draws, moves the sequence or makes an ID of it, with the same signatures (so
  // that column DEFAULTs and callers keep working, and fail with SF005). A call already running
  // the old body when the fence commits meets a fenced helper at its next step, or the
  // sequence's end (2200H, 22003); whatever it could still take is at most L.
  const fenced: [string, string][] = [
    ['next_id()', 'bigint'],
    ['next_ids(n integer)', 'SETOF bigint'],
    ['_reserve(n integer)', 'bigint'],
    ['_catch_up()', 'boolean'],
    ['_advance_to(v bigint)', 'bigint'],
    ['_wait_gen()', 'void'],
    ['_settle(g1 bigint, v bigint, g2 bigint)', 'bigint'],
    ['_accept(g1 bigint, v bigint, g2 bigint, now_ms bigint)', 'bigint'],
    ['_compose(v bigint)', 'bigint'],
  ]
  const refuse = (signature: string, returns: string) => `
CREATE OR REPLACE FUNCTION ${s}.${signature} RETURNS ${returns}
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM ${s}._moved();${returns === 'void' ? '' : returns.startsWith('SETOF') ? '\n  RETURN;' : '\n  RETURN NULL;'}
END
$$;
`
  return `-- shardflake ${SQL_VERSION}: fence logical shard ${shard}, moved to another database
CREATE SEQUENCE IF NOT EXISTS ${s}.id_gen AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
-- The locks every draw takes, in the order draws take them: ALTER SEQUENCE blocks concurrent
-- nextval and setval until this transaction ends, and waits for transactions that drew from it.
ALTER SEQUENCE ${s}.id_gen NO CYCLE;
ALTER SEQUENCE ${s}.id_seq NO CYCLE;

DO $shardflake$
DECLARE
  r record;
  last bigint;
  fence bigint;
  current_max bigint;
  tries integer := 0;
BEGIN
  SELECT schema_name, retired_at, fence_value INTO r FROM ${c}.shards WHERE shard = ${shard} FOR UPDATE;
  IF NOT FOUND OR r.schema_name <> '${name}' THEN
    RAISE EXCEPTION USING ERRCODE = 'SF003',
      MESSAGE = 'shardflake: logical shard ${shard} is not installed in schema ${name} of this database: nothing to fence';
  END IF;
  LOOP
    tries := tries + 1;
    SELECT last_value INTO last FROM ${s}.id_seq;
    SELECT seqmax INTO current_max FROM pg_catalog.pg_sequence WHERE seqrelid = ${seq};
    -- L: the last value plus the margin, or an earlier fence (never lowered).
    fence := CASE
      WHEN r.retired_at IS NOT NULL THEN greatest(last, r.fence_value, 1)
      WHEN last > ${n.maxValue - headroom} THEN ${n.maxValue}
      ELSE greatest(last + ${headroom}, 1)
    END;
    EXIT WHEN current_max = fence;
    BEGIN
      EXECUTE format('ALTER SEQUENCE ${s}.id_seq MAXVALUE %s', fence);
      EXIT;
    EXCEPTION WHEN invalid_parameter_value THEN
      -- The value passed L between the read and the ALTER (not while this transaction holds the
      -- sequence's lock; never assumed): read it again.
      IF tries >= 100 THEN
        RAISE;
      END IF;
    END;
  END LOOP;
  -- Draws already running see a move that never ends; their next step is a fenced helper.
  PERFORM setval(${gen}, (SELECT last_value FROM ${s}.id_gen), false);
  UPDATE ${c}.shards SET retired_at = coalesce(retired_at, now()), fence_value = fence, updated_at = now()
  WHERE shard = ${shard};
END
$shardflake$;

-- Raises SF005: the shard moved; nothing here draws or moves its sequence any more.
CREATE OR REPLACE FUNCTION ${s}._moved() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  r record;
BEGIN
  SELECT moved_to, retired_at INTO r FROM ${c}.shards WHERE shard = ${shard};
  RAISE EXCEPTION USING ERRCODE = 'SF005',
    MESSAGE = format('shardflake: logical shard ${shard} moved to another database%s%s; update the shard map. No ID was issued.', coalesce(' (' || r.moved_to || ')', ''), coalesce(' on ' || r.retired_at, ''));
END
$$;
${fenced.map(([signature, returns]) => refuse(signature, returns)).join('')}`
}
