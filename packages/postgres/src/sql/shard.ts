import type { Ddl } from '@shardflake/core'
import { createSchemaScript } from './common'
import { asDdl } from './ddl'
import {
  type PostgresSqlOptions,
  type ResolvedSqlOptions,
  resolveSqlOptions,
  SQL_VERSION,
  shardContext,
  timeOf,
} from './options'
import { MOVE_BUDGET, movesSoFar, sequenceMoveRoutines } from './shard-moves'

/**
 * The SQL for one logical shard: its schema, sequences, `next_id()`, `next_ids(n)` and the
 * helpers they call, and its row in the metadata table. Idempotent: running it again keeps the
 * sequence where it is and replaces the functions. Needs the common objects of the same version
 * ({@link commonSql}); refuses (SQLSTATE `SF005`) a shard that was moved away from this database.
 *
 * Why these never repeat an ID, and how a move keeps that across databases:
 * `docs/next-id.md` in this package.
 */
export function shardSql(options: PostgresSqlOptions, shard: number): Ddl {
  return asDdl(shardScript(resolveSqlOptions(options, { where: 'shardSql options' }), shard))
}

/**
 * The session setting where a draw records the generation under which its session last emptied its
 * sequence cache (see `_enter` in {@link shardScript}). @internal
 */
export function cacheSetting(schemaName: string): string {
  return `shardflake.cache_${schemaName}`
}

/** {@link shardSql} as one script. @internal */
export function shardScript(o: ResolvedSqlOptions, shard: number): string {
  const x = shardContext(o, shard)
  const { layout, n, name, s, c, seq, gen, compose, nowV } = x
  const discardInLoop = o.cache > 1 ? '\n      DISCARD SEQUENCES;' : ''
  const discardInSettle = o.cache > 1 ? '\n  DISCARD SEQUENCES;' : ''
  // With CACHE above 1: a block this session cached may come from a draw cut short inside a move
  // (see _enter); checked before each draw's nextval.
  const enterInLoop =
    o.cache > 1
      ? `\n    IF current_setting('${cacheSetting(name)}', true) IS DISTINCT FROM g1::text THEN\n      PERFORM ${s}._enter(g1);\n    END IF;`
      : ''
  // In next_id() the common case (the generation is the recorded one) costs no function call; the
  // generation read for the seqlock is then a second read, after the one compared (sound either
  // way: the cache was trusted at the first).
  const readGen = `pg_sequence_last_value(${gen})`
  const g1OfNextId =
    o.cache > 1
      ? `CASE WHEN current_setting('${cacheSetting(name)}', true) = ${readGen}::text THEN ${readGen} ELSE ${s}._enter(${readGen}) END`
      : readGen
  const retiredCheck = `  IF EXISTS (SELECT 1 FROM ${c}.shards WHERE shard = ${shard} AND retired_at IS NOT NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF005',
      MESSAGE = format('shardflake: logical shard ${shard} moved from this database to another one%s%s; installing it here again would issue IDs the new home issues too. To bring it back, move it back (movePostgresShards).', (SELECT coalesce(' (' || moved_to || ')', '') FROM ${c}.shards WHERE shard = ${shard}), (SELECT ' on ' || retired_at FROM ${c}.shards WHERE shard = ${shard}));
  END IF;`
  return `-- shardflake ${SQL_VERSION}: logical shard ${shard} of layout ${JSON.stringify(layout.name)}
${createSchemaScript(name)}
-- Version 5 and earlier moved the sequence under a session-level lock let go by an error handler
-- (which Citus cannot run inside a distributed statement). Waits for such a move running now.
SELECT pg_advisory_xact_lock(${x.legacyLock});
DROP FUNCTION IF EXISTS ${s}._unlock();

DO $shardflake$
BEGIN
  IF EXISTS (SELECT 1 FROM ${c}.shards WHERE shard = ${shard} AND schema_name <> '${name}') THEN
    RAISE EXCEPTION USING ERRCODE = 'SF003',
      MESSAGE = format('shardflake: logical shard ${shard} is already installed in schema %s, not ${name}: one shard must have one source', (SELECT schema_name FROM ${c}.shards WHERE shard = ${shard}));
  END IF;
END
$shardflake$;

-- Counts in ID space: value = time << ${n.S} | sequence. MAXVALUE is the end of the layout's time.
-- A new shard starts at the clock, so that its first IDs carry the time they are made.
DO $shardflake$
BEGIN
  IF to_regclass('${s}.id_seq') IS NULL THEN
    EXECUTE format('CREATE SEQUENCE ${s}.id_seq AS bigint MINVALUE 0 MAXVALUE ${n.maxValue} START %s CACHE ${o.cache} NO CYCLE',
      greatest(0, least(${nowV} - 1, ${n.maxValue})));
  END IF;
END
$shardflake$;
-- A shard moved away from this database keeps its fence (MAXVALUE at the last value it may have
-- issued): refused here, before the ALTER that would lift it, and again after it (the ALTER waits
-- for a fence being set meanwhile, and each statement here sees what committed before it).
DO $shardflake$
BEGIN
${retiredCheck}
  ALTER SEQUENCE ${s}.id_seq MAXVALUE ${n.maxValue} CACHE ${o.cache};
${retiredCheck}
END
$shardflake$;
-- Seqlock generation: NULL (not called) while the sequence is being moved forward.
CREATE SEQUENCE IF NOT EXISTS ${s}.id_gen AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;

CREATE OR REPLACE FUNCTION ${s}._compose(v bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ${compose('v')}
$$;

${o.cache > 1 ? enterFunction(s, name) : ''}${sequenceMoveRoutines(x)}-- n new IDs of shard ${shard}, ascending, in one call: from ${o.reserveFrom} on a reserved range,
-- below that n draws (also beyond ${MOVE_BUDGET} moves in one transaction).
CREATE OR REPLACE FUNCTION ${s}.next_ids(n integer) RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g1 bigint;
  g2 bigint;
  vs bigint[];
  nv bigint;
  first bigint;
  tries integer := 0;
BEGIN
  IF n IS NULL OR n < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('shardflake: next_ids(n) needs n >= 1, got %s', n);
  END IF;
  IF n >= ${o.reserveFrom} AND ${movesSoFar} < ${MOVE_BUDGET} THEN
    first := ${s}._reserve(n);
    RETURN QUERY SELECT ${s}._compose(v) FROM generate_series(first, first + n - 1) AS v;
    RETURN;
  END IF;
  LOOP
    tries := tries + 1;
    IF tries > 1000 THEN
      RAISE EXCEPTION USING ERRCODE = 'SF004', MESSAGE = 'shardflake: shard ${shard}: could not draw IDs in 1000 attempts';
    END IF;
    g1 := pg_sequence_last_value(${gen});
    IF g1 IS NULL THEN
      PERFORM ${s}._wait_gen();
      CONTINUE;
    END IF;
    nv := ${nowV};
    IF coalesce(pg_sequence_last_value(${seq}), -1) < nv - ${n.margin} AND ${s}._catch_up() THEN
      CONTINUE;
    END IF;${enterInLoop}
    vs := ARRAY(SELECT nextval(${seq}) FROM generate_series(1, n));
    g2 := pg_sequence_last_value(${gen});
    IF g2 IS DISTINCT FROM g1 THEN${discardInLoop}
      CONTINUE;
    END IF;
    nv := ${nowV};
    IF vs[1] < nv - ${n.margin} AND ${s}._catch_up() THEN
      CONTINUE;
    END IF;
    IF vs[n] > nv + ${n.drift} THEN
      PERFORM ${s}._throttle(vs[n]);
    END IF;
    RETURN QUERY SELECT ${s}._compose(v) FROM unnest(vs) AS v;
    RETURN;
  END LOOP;
END
$$;

-- The slow path of next_id(): the draw overlapped a move of the sequence, or the sequence is
-- behind or ahead of the clock.
CREATE OR REPLACE FUNCTION ${s}._settle(g1 bigint, v bigint, g2 bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  nv bigint;
BEGIN
  IF g1 = g2 THEN
    nv := ${nowV};
    IF v < nv - ${n.margin} THEN
      IF ${s}._catch_up() THEN
        RETURN (SELECT x FROM ${s}.next_ids(1) AS x);
      END IF;
    ELSIF v > nv + ${n.drift} THEN
      PERFORM ${s}._throttle(v);
    END IF;
    RETURN ${s}._compose(v);
  END IF;${discardInSettle}
  RETURN (SELECT x FROM ${s}.next_ids(1) AS x);
END
$$;

-- The fast path of next_id(): one expression (the draw was not overlapped by a move, and the
-- value is within the margin behind and the drift ahead of the clock), else the slow path.
CREATE OR REPLACE FUNCTION ${s}._accept(g1 bigint, v bigint, g2 bigint, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN CASE
    WHEN g1 = g2 AND v - (${timeOf(o, 'now_ms')} << ${n.S}) BETWEEN -${n.margin} AND ${n.drift} THEN ${compose('v')}
    ELSE ${s}._settle(g1, v, g2)
  END;
END
$$;

-- One new ID of shard ${shard}; use it as the column DEFAULT. Inlined into the caller's plan:
-- the arguments are evaluated in order (generation, nextval, generation, clock).
CREATE OR REPLACE FUNCTION ${s}.next_id() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT ${s}._accept(${g1OfNextId}, nextval(${seq}), pg_sequence_last_value(${gen}), ${c}.now_ms())
$$;

INSERT INTO ${c}.shards (shard, schema_name, worker, sequence_cache, version)
VALUES (${shard}, '${name}', ${o.worker}, ${o.cache}, '${SQL_VERSION}')
ON CONFLICT (shard) DO UPDATE
  SET worker = EXCLUDED.worker, sequence_cache = EXCLUDED.sequence_cache, version = EXCLUDED.version, updated_at = now();
`
}

/**
 * `_enter(g)`, which every draw calls with the generation it read before its nextval when the
 * sequence has CACHE above 1. Why: `docs/next-id.md`, "Sequence CACHE above 1".
 */
function enterFunction(s: string, name: string): string {
  return `-- With sequence CACHE above 1, called by every draw with the generation g it read, before its
-- nextval: the values this session cached are trusted only while the generation is the one it saw
-- when it last emptied its cache. A draw cut short between its nextval and its check (a cancel, a
-- statement_timeout) never throws away a block it took while the sequence was being moved; any
-- such block was taken under another generation, so this drops it (DISCARD SEQUENCES) before it
-- is used. Returns g.
CREATE OR REPLACE FUNCTION ${s}._enter(g bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF g IS NOT NULL AND current_setting('${cacheSetting(name)}', true) IS DISTINCT FROM g::text THEN
    DISCARD SEQUENCES;
    PERFORM set_config('${cacheSetting(name)}', g::text, false);
  END IF;
  RETURN g;
END
$$;

`
}
