import {
  ConfigurationError,
  fnv1a32,
  InvalidArgumentError,
  InvalidLayoutError,
  type Layout,
  readShardList,
  type Sharding,
  type ShardList,
} from '@shardflake/core'
import { checkIdentifier, quoteIdent, quoteLiteral, quoteQualified } from './identifiers'

/** The version of the SQL objects this package installs (recorded in the metadata tables). */
export const SQL_VERSION = '4'

/** What the SQL generator, the installer and the source need to know about an installation. */
export interface PostgresSchemaOptions {
  /**
   * The application's sharding (`defineSharding({ layout, logicalShards })`): the layout's
   * epoch, widths and time unit are baked into the SQL, and both are recorded in the metadata.
   */
  sharding: Sharding
  /**
   * Each logical shard lives in its own schema, named prefix + shard number.
   * @default 'shard_'
   */
  schemaPrefix?: string
  /**
   * The schema holding what all shards share: the metadata tables (`layout`, `shards`), the clock
   * `now_ms()` and the decode helpers `shardflake_timestamp(id)`, `shardflake_shard(id)`,
   * `shardflake_sequence(id)`.
   * @default 'shardflake'
   */
  schema?: string
}

/** Options of the generated SQL. */
export interface PostgresSqlOptions extends PostgresSchemaOptions {
  /** Worker id baked into every ID, for layouts with worker bits. @default 0 */
  worker?: number
  /**
   * `CACHE` of each shard's sequence. Above 1 a session preallocates values: fewer writes to the
   * sequence page, but IDs from different sessions are then no longer in time order (never
   * repeated, though).
   * @default 1
   */
  cache?: number
  /**
   * How far (in ms of ID space) a shard's sequence may fall behind the clock before a call moves
   * it forward to the clock: under light load an ID's embedded time is up to this much older than
   * the moment it was made. Smaller keeps the time closer to the clock; larger moves the sequence
   * less often (each move costs a few sequence writes and makes concurrent draws retry: 5 ms ran
   * `next_id()` at 0.7x of bare `nextval()` from 8 clients, 20-100 ms at 0.85x).
   * @default 50
   */
  marginMs?: number
  /**
   * How far ahead of the clock the sequence may run (bursts above 2^sequenceBits IDs per time
   * unit borrow the next units; a clock that stepped back leaves it ahead) before calls wait for
   * the clock.
   * @default 1000
   */
  maxDriftMs?: number
  /**
   * The longest one call waits for the clock; beyond it the call fails with SQLSTATE `SF001`
   * and issues nothing.
   * @default 2000
   */
  maxWaitMs?: number
  /**
   * From how many IDs on `next_ids(n)` reserves its n values in one move of the sequence (a
   * constant number of sequence operations under the shard's advisory lock, whatever n is) instead
   * of n `nextval` calls. Below it the per-value draw stays: it needs no lock and, with sequence
   * `CACHE` 1, forces a WAL flush at commit only on every 32nd value, where each reservation forces
   * one (it writes the sequence). Measured with pgbench: value by value made 1.6-3.4x the IDs/s of
   * a reservation for n <= 16, 1.0-1.3x at 32 and 64, the same at 128; at 256 the reservation was
   * ahead with 8 clients (1.26x). See the package README.
   * @default 128
   */
  reserveFrom?: number
}

/** Every option resolved, plus the numbers the SQL is made of. @internal */
export interface ResolvedSqlOptions {
  sharding: Sharding
  layout: Layout
  schema: string
  schemaPrefix: string
  worker: number
  cache: number
  marginMs: number
  maxDriftMs: number
  maxWaitMs: number
  reserveFrom: number
  /** First key of the advisory locks (a hash of the common schema name). */
  lockKey: number
}

/**
 * Validates and fills in the options.
 * @throws InvalidIdentifierError for a schema name or prefix that is not a plain identifier.
 * @throws InvalidLayoutError for a decode-only layout or one whose time field is not above its sequence.
 * @throws InvalidArgumentError for numbers out of range.
 */
export function resolveSqlOptions(options: PostgresSqlOptions): ResolvedSqlOptions {
  const sharding = checkSharding(options?.sharding, 'The PostgreSQL SQL')
  const { layout } = sharding
  if (layout.decodeOnly) {
    throw new InvalidLayoutError(
      `Layout ${JSON.stringify(layout.name)} is for decoding other systems' IDs; define your own layout to generate.`,
    )
  }
  if (layout.order.indexOf('time') > layout.order.indexOf('sequence')) {
    throw new InvalidLayoutError(
      'PostgreSQL next_id() needs the time field above the sequence field, so that IDs grow with the sequence.',
    )
  }
  const schema = checkIdentifier('schema', options.schema ?? 'shardflake')
  const schemaPrefix = options.schemaPrefix ?? 'shard_'
  checkIdentifier('schema prefix', schemaPrefix)
  checkIdentifier('schema prefix', `${schemaPrefix}${layout.shardCount - 1}`)
  const worker = options.worker ?? 0
  if (!Number.isInteger(worker) || worker < 0 || worker >= layout.workerCount) {
    throw new InvalidArgumentError(
      `worker must be an integer from 0 to ${layout.workerCount - 1}, got ${String(worker)}.`,
    )
  }
  const integer = (name: string, value: number, min: number, max: number): number => {
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      throw new InvalidArgumentError(
        `${name} must be an integer from ${min} to ${max}, got ${String(value)}.`,
      )
    }
    return value
  }
  return {
    sharding,
    layout,
    schema,
    schemaPrefix,
    worker,
    cache: integer('cache', options.cache ?? 1, 1, 1_000_000),
    marginMs: integer('marginMs', options.marginMs ?? 50, 1, 3_600_000),
    maxDriftMs: integer('maxDriftMs', options.maxDriftMs ?? 1000, 0, 86_400_000),
    maxWaitMs: integer('maxWaitMs', options.maxWaitMs ?? 2000, 0, 3_600_000),
    reserveFrom: integer('reserveFrom', options.reserveFrom ?? 128, 1, 2_147_483_647),
    lockKey: fnv1a32(`shardflake:${schema}`) | 0,
  }
}

/**
 * The sharding option, checked: every installer, generator and source needs one, and none has a
 * default, so that one key lands on one shard whoever makes its ID.
 * @throws ConfigurationError naming `logicalShards` when it is missing. @internal
 */
export function checkSharding(sharding: Sharding | undefined, who: string): Sharding {
  if (
    !sharding ||
    typeof sharding.logicalShards !== 'number' ||
    typeof sharding.layout?.shardOf !== 'function'
  ) {
    throw new ConfigurationError(
      `${who} needs the application's sharding: pass { sharding: defineSharding({ layout, logicalShards }) }. There is no default logicalShards: it decides which shard every key goes to, so decide it once and give the same sharding to every source, installer and adapter.`,
    )
  }
  return sharding
}

/** The schema name of a logical shard (`shard_5`). @throws InvalidIdentifierError */
export function shardSchemaName(shard: number, schemaPrefix = 'shard_'): string {
  return checkIdentifier('schema', `${schemaPrefix}${shard}`)
}

/**
 * The clause for a column definition: `DEFAULT "shard_5".next_id()`.
 *
 * @example
 * ```ts
 * await pool.query(`CREATE TABLE posts (id bigint PRIMARY KEY ${defaultClause(5)}, body text)`)
 * ```
 */
export function defaultClause(shard: number, options: { schemaPrefix?: string } = {}): string {
  checkShardNumber(shard)
  return `DEFAULT ${quoteIdent('schema', shardSchemaName(shard, options.schemaPrefix))}.next_id()`
}

/**
 * `ALTER TABLE ... ALTER COLUMN ... SET DEFAULT "shard_5".next_id()` for an existing table.
 * @throws InvalidIdentifierError for a table or column name that is not a plain identifier.
 */
export function setDefaultSql(options: {
  /** `table` or `schema.table`. */
  table: string
  shard: number
  /** @default 'id' */
  column?: string
  schemaPrefix?: string
}): string {
  const table = quoteQualified('table', options.table)
  const column = quoteIdent('column', options.column ?? 'id')
  return `ALTER TABLE ${table} ALTER COLUMN ${column} SET ${defaultClause(options.shard, options)}`
}

function checkShardNumber(shard: number): void {
  if (!Number.isSafeInteger(shard) || shard < 0) {
    throw new InvalidArgumentError(`A shard number must be an integer >= 0, got ${String(shard)}.`)
  }
}

/** Numbers of the layout in the form the SQL uses them. */
function numbers(o: ResolvedSqlOptions) {
  const { layout } = o
  const S = layout.sequenceBits
  const unit = layout.timeUnitMs
  const perUnit = 2n ** BigInt(S)
  const margin = BigInt(Math.max(1, Math.ceil(o.marginMs / unit))) * perUnit
  const drift = BigInt(Math.ceil(o.maxDriftMs / unit)) * perUnit
  const wait = BigInt(Math.ceil(o.maxWaitMs / unit)) * perUnit
  const maxValue = BigInt(layout.timeLimit) * perUnit - 1n
  return {
    S,
    unit,
    epoch: layout.epoch,
    margin,
    drift,
    wait,
    maxValue,
    seqMask: perUnit - 1n,
    timeMask: 2n ** BigInt(layout.timeBits) - 1n,
    shardMask: 2n ** BigInt(layout.shardBits) - 1n,
    workerMask: 2n ** BigInt(layout.workerBits) - 1n,
    shifts: layout.shifts,
  }
}

/** `(ms - epoch) / unit`, the time field for a ms expression. */
function timeOf(o: ResolvedSqlOptions, ms: string): string {
  const { epoch, unit } = numbers(o)
  return unit === 1 ? `(${ms} - ${epoch})` : `((${ms} - ${epoch}) / ${unit})`
}

function signed(value: bigint): bigint {
  return value >= 1n << 63n ? value - (1n << 64n) : value
}

/**
 * Adds the columns that record a logical shard moved away from this database (idempotent). Part
 * of {@link commonSql}; run alone on a move's old home. @internal
 */
export function retirementColumnsSql(o: ResolvedSqlOptions): string {
  const c = quoteIdent('schema', o.schema)
  return `-- A logical shard moved to another database stays recorded here, fenced: when (retired_at), where
-- to (moved_to), and the highest value of its sequence this database can ever have issued
-- (fence_value). Installing it here again is refused; only a move brings it back.
ALTER TABLE ${c}.shards
  ADD COLUMN IF NOT EXISTS retired_at timestamptz,
  ADD COLUMN IF NOT EXISTS moved_to text,
  ADD COLUMN IF NOT EXISTS fence_value bigint;
`
}

/** The SQL for what every shard shares (common schema, metadata, clock, decode helpers). */
export function commonSql(options: PostgresSqlOptions | ResolvedSqlOptions): string {
  const o = 'lockKey' in options ? options : resolveSqlOptions(options)
  const { layout } = o
  const n = numbers(o)
  const c = quoteIdent('schema', o.schema)
  const description = JSON.stringify(layout.toJSON())
  const order = layout.order.join(',')
  const logical = o.sharding.logicalShards
  const field = (name: 'shard' | 'sequence' | 'worker', mask: bigint) =>
    `((id >> ${n.shifts[name]}) & ${mask})::integer`
  return `-- shardflake ${SQL_VERSION}: objects shared by all shards of layout ${JSON.stringify(layout.name)}
CREATE SCHEMA IF NOT EXISTS ${c};

CREATE TABLE IF NOT EXISTS ${c}.layout (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  name text NOT NULL,
  epoch_ms bigint NOT NULL,
  time_unit_ms integer NOT NULL,
  time_bits integer NOT NULL,
  shard_bits integer NOT NULL,
  worker_bits integer NOT NULL,
  sequence_bits integer NOT NULL,
  field_order text NOT NULL,
  description jsonb NOT NULL,
  version text NOT NULL,
  installed_at timestamptz NOT NULL DEFAULT now(),
  -- How many logical shards keys are spread over (Sharding.logicalShards).
  logical_shards integer CHECK (logical_shards > 0)
);
ALTER TABLE ${c}.layout ADD COLUMN IF NOT EXISTS logical_shards integer CHECK (logical_shards > 0);

CREATE TABLE IF NOT EXISTS ${c}.shards (
  shard integer PRIMARY KEY,
  schema_name text NOT NULL UNIQUE,
  worker integer NOT NULL,
  sequence_cache integer NOT NULL,
  version text NOT NULL,
  installed_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

${retirementColumnsSql(o)}
-- Refuse a different sharding (layout or logical shards) over the recorded one: IDs would lose
-- their order and could repeat, and keys would land on other shards.
DO $shardflake$
DECLARE
  r record;
BEGIN
  LOCK TABLE ${c}.layout IN EXCLUSIVE MODE;
  SELECT * INTO r FROM ${c}.layout;
  IF NOT FOUND THEN
    INSERT INTO ${c}.layout (name, epoch_ms, time_unit_ms, time_bits, shard_bits, worker_bits, sequence_bits, field_order, description, version, logical_shards)
    VALUES (${quoteLiteral(layout.name)}, ${layout.epoch}, ${layout.timeUnitMs}, ${layout.timeBits}, ${layout.shardBits}, ${layout.workerBits}, ${layout.sequenceBits}, '${order}', ${quoteLiteral(description)}::jsonb, '${SQL_VERSION}', ${logical});
  ELSIF (r.epoch_ms, r.time_unit_ms, r.time_bits, r.shard_bits, r.worker_bits, r.sequence_bits, r.field_order, coalesce(r.logical_shards, ${logical}))
        IS DISTINCT FROM (${layout.epoch}::bigint, ${layout.timeUnitMs}, ${layout.timeBits}, ${layout.shardBits}, ${layout.workerBits}, ${layout.sequenceBits}, '${order}'::text, ${logical}) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF002',
      MESSAGE = format('shardflake: schema %s already holds layout %s (epoch %s, %s/%s/%s/%s bits, %s ms unit) with logicalShards %s; refusing to install layout %s (epoch %s, %s/%s/%s/%s bits, %s ms unit) with logicalShards ${logical} over it: IDs would lose their order and could repeat, and keys would land on other shards',
        ${quoteLiteral(o.schema)}, r.name, r.epoch_ms, r.time_bits, r.shard_bits, r.worker_bits, r.sequence_bits, r.time_unit_ms, r.logical_shards,
        ${quoteLiteral(layout.name)}, ${layout.epoch}, ${layout.timeBits}, ${layout.shardBits}, ${layout.workerBits}, ${layout.sequenceBits}, ${layout.timeUnitMs});
  ELSIF r.logical_shards IS NULL THEN
    UPDATE ${c}.layout SET logical_shards = ${logical};
  END IF;
END
$shardflake$;

-- The clock next_id() reads, in ms since 1970. Tests replace it to step the clock back.
CREATE OR REPLACE FUNCTION ${c}.now_ms() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT floor(date_part('epoch', clock_timestamp()) * 1000)::bigint
$$;

-- Decode helpers: the time, shard and sequence an ID carries (signed or not).
CREATE OR REPLACE FUNCTION ${c}.shardflake_timestamp(id bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT to_timestamp(((((id >> ${n.shifts.time}) & ${n.timeMask}) * ${n.unit} + ${n.epoch})::double precision) / 1000)
$$;

CREATE OR REPLACE FUNCTION ${c}.shardflake_shard(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ${field('shard', n.shardMask)}
$$;

CREATE OR REPLACE FUNCTION ${c}.shardflake_sequence(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ${field('sequence', n.seqMask)}
$$;
${
  layout.workerBits > 0
    ? `
CREATE OR REPLACE FUNCTION ${c}.shardflake_worker(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ${field('worker', n.workerMask)}
$$;
`
    : ''
}`
}

/**
 * The SQL for one logical shard: its schema, sequences, `next_id()`, `next_ids(n)` and the
 * helpers they call, and its row in the metadata table. Idempotent: running it again keeps the
 * sequence where it is and replaces the functions. Needs the common objects of the same version
 * ({@link commonSql}); refuses (SQLSTATE `SF005`) a shard that was moved away from this database.
 *
 * ## How `next_id()` and `next_ids(n)` never repeat an ID
 *
 * The sequence `id_seq` counts in ID space: its value is `time << sequenceBits | sequence`, so
 * each value is exactly one ID, whatever the clock does. The clock only decides where the
 * sequence should be; uniqueness rests on two rules, neither of which involves the clock or timing:
 *
 * 1. **Only a "move" writes the sequence with `setval`**, and a move runs under the shard's
 *    session-level advisory lock (so moves never overlap), reads the sequence's real last value
 *    (`SELECT last_value FROM id_seq`: with `CACHE` above 1 that is the end of the last block any
 *    session took) and sets it to a value above that last value. There are four moves: the
 *    catch-up (to the clock, when the sequence is more than `marginMs` behind it), the
 *    reservation of `next_ids(n)` for n >= `reserveFrom` (to the end of a range of n values that
 *    starts after the last value, or at the clock when the last value is more than `marginMs`
 *    behind), the advance of a shard moved here from another database (`_advance_to(v)`: to
 *    greatest(last value, v), at or above the last value), and the repair of a move whose
 *    session died (no `setval` of the sequence at all).
 * 2. **A seqlock in a second sequence, `id_gen`.** A move sets `id_gen` to "not called" (readers
 *    see NULL) before it reads the last value and to a generation never used before (`g + 1`)
 *    after its `setval`; a catch-up that found nothing to move puts back `g`. Every draw reads
 *    `id_gen` before (g1) and after (g2) its `nextval` calls and keeps the values only when
 *    `g1 = g2`, not NULL; otherwise it drops them (gaps) and draws again, with `CACHE` above 1
 *    after `DISCARD SEQUENCES`, which drops the block of values the session cached.
 *
 * Why that suffices. Reads and writes of a sequence are atomic (each under the page's buffer
 * lock) and a draw makes them in program order (in `next_id()` the generation, `nextval` and the
 * generation again are the arguments of one call, evaluated left to right), so every `nextval`
 * falls either before a move's "not called", inside the move, or after its new generation. A
 * draw whose reads both see the same non-NULL generation had no move begin or end between them (a
 * move wholly in between shows a new number in g2, one overlapping a read shows NULL there; only
 * a catch-up that wrote nothing can show the old number again, and it wrote no value), so each
 * of its `nextval` calls lies wholly before or wholly after every move. The sequence only grows
 * between moves, so a value taken before a move is at most the last value that move reads, and
 * the move sets the sequence above it; a value taken after a move is above where it set the
 * sequence. A move whose session died ends, for this argument, at the repair that gives the next
 * generation under the lock; whether or not its `setval` ran, the next move reads the real value.
 * Values taken *inside* a move (between its read and its `setval`; the mover may be descheduled
 * there for any time, so there may be many) can be repeated after the `setval`, or fall into a
 * reserved range — and they are exactly the ones every seqlock check throws away. With `CACHE`
 * above 1, a block a session takes inside a move is thrown away whole (`DISCARD SEQUENCES`); a
 * block taken outside every move is below the next move's read or above the previous move's
 * target, so all its values are unique; and `setval` drops the mover's own cache. So the values
 * kept — single draws, per-value batches and reserved ranges — are pairwise distinct. A reserved
 * range is the mover's own: it lies above every value taken before the move and at or below
 * where the sequence is set, so only values taken inside the move (all thrown away) can meet it.
 *
 * Waits. A draw that sees NULL waits on the advisory lock itself (blocked in the lock manager,
 * woken when the mover lets go), then repairs `id_gen` if it is still NULL (the mover died:
 * crash, `pg_terminate_backend`). A reservation waits on the lock too, rather than falling back
 * to n `nextval` calls: while the lock is held `id_gen` is NULL and no draw can succeed anyway.
 * A catch-up only tries the lock: whoever holds it is moving the sequence already. Every holder
 * lets go before returning, on errors and on cancels (`statement_timeout`) too; nothing waits
 * for the clock while holding it.
 *
 * The clock rules (not needed for uniqueness): a value more than `marginMs` behind the clock
 * triggers a catch-up and a new draw; a value more than `maxDriftMs` ahead (a clock that stepped
 * back, bursts above 2^sequenceBits per time unit, big reservations) makes the call wait for the
 * clock, at most `maxWaitMs`, then fail with SF001 (the values drawn are dropped). A reservation
 * that would end beyond what that wait can cover is refused without moving the sequence.
 *
 * Moving the shard to another database (`moveShards` in the installer) keeps the promise across
 * databases with one number, the fence L. On the old home, {@link fenceSql} sets `MAXVALUE` of
 * `id_seq` to L, at least its last value, under the lock of `ALTER SEQUENCE` (documented: it
 * blocks concurrent `nextval`, `setval`, `currval` and `lastval` until its transaction ends, and it
 * waits for the transactions that drew from the shard), so nothing there can ever exceed L: no
 * `nextval` (it fails at `MAXVALUE`), no `setval` of a move (out of bounds), no block a session
 * cached (it lies at or below the last value); values a stale move might still set back lie at or
 * below L too. On the new home, `_advance_to(L)` is a fourth move: it sets the sequence to
 * greatest(last value, L), so every value drawn there afterwards is above L (the argument above
 * holds with "at or above" for it: values taken before it are at most the last value it reads).
 * Which session issued what on the old home does not matter, only that none of it exceeds L.
 */
export function shardSql(options: PostgresSqlOptions | ResolvedSqlOptions, shard: number): string {
  const o = 'lockKey' in options ? options : resolveSqlOptions(options)
  const { layout } = o
  o.sharding.checkShard(shard)
  const n = numbers(o)
  const name = shardSchemaName(shard, o.schemaPrefix)
  const s = quoteIdent('schema', name)
  const c = quoteIdent('schema', o.schema)
  const seq = `'${s}.id_seq'::regclass`
  const gen = `'${s}.id_gen'::regclass`
  const constant = signed((BigInt(shard) << n.shifts.shard) | (BigInt(o.worker) << n.shifts.worker))
  const compose = (v: string) =>
    `((${v} >> ${n.S}) << ${n.shifts.time}) | (${constant})::bigint | ((${v} & ${n.seqMask}) << ${n.shifts.sequence})`
  const nowV = `(${timeOf(o, `${c}.now_ms()`)} << ${n.S})`
  const lock = `${o.lockKey}, ${shard}`
  const lockClass = o.lockKey >>> 0
  const discardInLoop = o.cache > 1 ? '\n      DISCARD SEQUENCES;' : ''
  const discardInSettle = o.cache > 1 ? '\n  DISCARD SEQUENCES;' : ''
  const retiredCheck = `  IF EXISTS (SELECT 1 FROM ${c}.shards WHERE shard = ${shard} AND retired_at IS NOT NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF005',
      MESSAGE = format('shardflake: logical shard ${shard} moved from this database to another one%s%s; installing it here again would issue IDs the new home issues too. To bring it back, move it back (movePostgresShards).', (SELECT coalesce(' (' || moved_to || ')', '') FROM ${c}.shards WHERE shard = ${shard}), (SELECT ' on ' || retired_at FROM ${c}.shards WHERE shard = ${shard}));
  END IF;`
  return `-- shardflake ${SQL_VERSION}: logical shard ${shard} of layout ${JSON.stringify(layout.name)}
CREATE SCHEMA IF NOT EXISTS ${s};

DO $shardflake$
BEGIN
  IF EXISTS (SELECT 1 FROM ${c}.shards WHERE shard = ${shard} AND schema_name <> '${name}') THEN
    RAISE EXCEPTION USING ERRCODE = 'SF003',
      MESSAGE = format('shardflake: logical shard ${shard} is already installed in schema %s, not ${name}: one shard must have one source', (SELECT schema_name FROM ${c}.shards WHERE shard = ${shard}));
  END IF;
END
$shardflake$;

-- Counts in ID space: value = time << ${n.S} | sequence. MAXVALUE is the end of the layout's time.
CREATE SEQUENCE IF NOT EXISTS ${s}.id_seq AS bigint MINVALUE 0 MAXVALUE ${n.maxValue} START 0 CACHE ${o.cache} NO CYCLE;
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

-- Raises SF007: the layout's time field is used up (the sequence cannot follow the clock).
CREATE OR REPLACE FUNCTION ${s}._exhausted() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'SF007',
    MESSAGE = 'shardflake: shard ${shard}: the time field of the layout ran out on ${new Date(layout.epoch + layout.timeLimit * layout.timeUnitMs).toISOString()}: no more IDs can be made. Define a layout with a later epoch. No ID was issued.';
END
$$;

-- Lets go of the shard's advisory lock if this session holds it. Only on error paths: a cancel
-- (statement_timeout) can land between taking the lock and the next statement, and a session
-- lock left behind would stop every move of this shard's sequence while the session lives.
CREATE OR REPLACE FUNCTION ${s}._unlock() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF EXISTS (
    SELECT 1 FROM pg_catalog.pg_locks
    WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid() AND granted
      AND classid = ${lockClass} AND objid = ${shard} AND objsubid = 2
  ) THEN
    PERFORM pg_advisory_unlock(${lock});
  END IF;
END
$$;

-- Moves the sequence forward to the clock when it is more than the margin behind. True when it
-- moved; false when it did not need to or another session holds the lock (that session is
-- moving the sequence).
CREATE OR REPLACE FUNCTION ${s}._catch_up() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  called boolean;
  last bigint;
  target bigint;
  moved boolean := false;
BEGIN
  BEGIN
    IF NOT pg_try_advisory_lock(${lock}) THEN
      RETURN false;
    END IF;
    SELECT last_value, is_called INTO g, called FROM ${s}.id_gen;
    IF called THEN
      PERFORM setval(${gen}, g, false);
    END IF;
    -- From here to the last setval(id_gen) every draw is discarded by its seqlock check.
    SELECT last_value INTO last FROM ${s}.id_seq;
    target := ${nowV} - 1;
    IF target > ${n.maxValue} THEN
      PERFORM ${s}._exhausted();
    END IF;
    IF last < target - ${n.margin} + 1 THEN
      PERFORM setval(${seq}, target, true);
      moved := true;
    END IF;
    -- A new generation when the sequence moved (or a session died half-way); else the same one.
    PERFORM setval(${gen}, CASE WHEN moved OR NOT called THEN g + 1 ELSE g END, true);
    -- The last statement of the protected block: a cancel cannot land between it and the end.
    PERFORM pg_advisory_unlock(${lock});
  EXCEPTION WHEN query_canceled OR others THEN
    PERFORM ${s}._unlock();
    RAISE;
  END;
  RETURN moved;
END
$$;

-- Waits while another session moves the sequence: blocked on the lock that session holds, woken
-- when it lets go. Repairs id_gen left NULL by a session that died while moving the sequence.
CREATE OR REPLACE FUNCTION ${s}._wait_gen() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  called boolean;
BEGIN
  BEGIN
    PERFORM pg_advisory_lock(${lock});
    SELECT last_value, is_called INTO g, called FROM ${s}.id_gen;
    IF NOT called THEN
      PERFORM setval(${gen}, g + 1, true);
    END IF;
    -- The last statement of the protected block: a cancel cannot land between it and the end.
    PERFORM pg_advisory_unlock(${lock});
  EXCEPTION WHEN query_canceled OR others THEN
    PERFORM ${s}._unlock();
    RAISE;
  END;
END
$$;

-- Waits until the value's time is at most maxDriftMs ahead of the clock, or fails (SF001).
CREATE OR REPLACE FUNCTION ${s}._throttle(v bigint) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  ahead bigint;
  waited bigint := 0;
BEGIN
  LOOP
    ahead := ((v >> ${n.S}) * ${n.unit} + ${n.epoch}) - ${c}.now_ms() - ${o.maxDriftMs};
    EXIT WHEN ahead <= 0;
    IF waited + ahead > ${o.maxWaitMs} THEN
      RAISE EXCEPTION USING ERRCODE = 'SF001',
        MESSAGE = format('shardflake: shard ${shard}: the sequence is %s ms ahead of the clock (%s ms allowed, waited %s ms of at most ${o.maxWaitMs}): the clock stepped back, or IDs were drawn faster than ${layout.capacityPerMs} per ms for longer than the drift allows. No ID was issued.', ahead + ${o.maxDriftMs}, ${o.maxDriftMs}, waited),
        DETAIL = json_build_object('aheadMs', ahead + ${o.maxDriftMs}, 'maxDriftMs', ${o.maxDriftMs}, 'waitedMs', waited, 'maxWaitMs', ${o.maxWaitMs})::text,
        HINT = 'Check the clock (NTP slew, not step), or draw fewer IDs per ms from this shard.';
    END IF;
    PERFORM pg_sleep(ahead / 1000.0);
    waited := waited + ahead;
  END LOOP;
END
$$;

-- Reserves n consecutive values of the sequence in a constant number of sequence operations and
-- returns the first: a move of the sequence like a catch-up (lock, id_gen "not called", the real
-- last value, setval, a new generation), to the end of the range instead of to the clock. The
-- range starts after the last value, or at the clock when that is more than the margin behind.
-- Waits for the lock: while another session holds it, id_gen reads NULL and no draw succeeds.
CREATE OR REPLACE FUNCTION ${s}._reserve(n integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
  nv bigint;
  first bigint;
  refused boolean := false;
BEGIN
  BEGIN
    PERFORM pg_advisory_lock(${lock});
    SELECT last_value INTO g FROM ${s}.id_gen;
    PERFORM setval(${gen}, g, false);
    -- From here to the last setval(id_gen) every draw is discarded by its seqlock check.
    SELECT last_value INTO last FROM ${s}.id_seq;
    nv := ${nowV};
    first := CASE WHEN last < nv - ${n.margin} THEN nv ELSE last + 1 END;
    -- A range ending further ahead than the wait for the clock may cover is refused unmoved.
    refused := first + n - 1 > nv + ${n.drift + n.wait};
    IF NOT refused AND first + n - 1 > ${n.maxValue} THEN
      PERFORM ${s}._exhausted();
    END IF;
    IF NOT refused THEN
      PERFORM setval(${seq}, first + n - 1, true);
    END IF;
    PERFORM setval(${gen}, g + 1, true);
    -- The last statement of the protected block: a cancel cannot land between it and the end.
    PERFORM pg_advisory_unlock(${lock});
  EXCEPTION WHEN query_canceled OR others THEN
    PERFORM ${s}._unlock();
    RAISE;
  END;
  IF refused AND n > ${n.drift + n.wait} THEN
    -- The batch alone is more than the shard makes within the drift and the wait: overload.
    RAISE EXCEPTION USING ERRCODE = 'SF006',
      MESSAGE = format('shardflake: shard ${shard}: next_ids(%s) refused: the shard makes ${layout.capacityPerMs} IDs per ms and may run ${o.maxDriftMs} ms ahead of the clock (and wait ${o.maxWaitMs} ms), at most ${n.drift + n.wait} IDs in one call. Ask for fewer IDs per call, spread the rows over more shards, or install with a larger maxDriftMs. The clock is fine; no ID was issued.', n),
      DETAIL = json_build_object('count', n, 'maxIds', ${n.drift + n.wait}, 'maxDriftMs', ${o.maxDriftMs}, 'maxWaitMs', ${o.maxWaitMs})::text;
  ELSIF refused THEN
    RAISE EXCEPTION USING ERRCODE = 'SF001',
      MESSAGE = format('shardflake: shard ${shard}: next_ids(%s) refused: its last ID would be %s ms ahead of the clock (%s ms allowed, at most ${o.maxWaitMs} ms of wait): earlier calls drew faster than ${layout.capacityPerMs} IDs per ms, or the clock stepped back. Ask for fewer IDs per call. No ID was issued.', n, (((first + n - 1) >> ${n.S}) - (nv >> ${n.S})) * ${n.unit}, ${o.maxDriftMs}),
      DETAIL = json_build_object('aheadMs', (((first + n - 1) >> ${n.S}) - (nv >> ${n.S})) * ${n.unit}, 'maxDriftMs', ${o.maxDriftMs}, 'waitedMs', 0, 'maxWaitMs', ${o.maxWaitMs})::text;
  END IF;
  IF first + n - 1 > nv + ${n.drift} THEN
    PERFORM ${s}._throttle(first + n - 1);
  END IF;
  RETURN first;
END
$$;

-- Moves the sequence to at least v, never backwards, and returns where it is: the last step of
-- moving the shard here from another database whose sequence was fenced at v, so that every value
-- issued here from now on is above every value the old home ever issued. A move like _reserve
-- (lock, id_gen "not called", the real last value, setval, a new generation): draws running here
-- meanwhile are drawn again.
CREATE OR REPLACE FUNCTION ${s}._advance_to(v bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
BEGIN
  IF v IS NULL OR v < 0 OR v > ${n.maxValue} THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('shardflake: shard ${shard}: _advance_to(v) needs v from 0 to ${n.maxValue}, got %s', v);
  END IF;
  BEGIN
    PERFORM pg_advisory_lock(${lock});
    SELECT last_value INTO g FROM ${s}.id_gen;
    PERFORM setval(${gen}, g, false);
    -- From here to the last setval(id_gen) every draw is discarded by its seqlock check.
    SELECT greatest(last_value, v) INTO last FROM ${s}.id_seq;
    PERFORM setval(${seq}, last, true);
    PERFORM setval(${gen}, g + 1, true);
    -- The last statement of the protected block: a cancel cannot land between it and the end.
    PERFORM pg_advisory_unlock(${lock});
  EXCEPTION WHEN query_canceled OR others THEN
    PERFORM ${s}._unlock();
    RAISE;
  END;
  RETURN last;
END
$$;

-- n new IDs of shard ${shard}, ascending, in one call: from ${o.reserveFrom} on a reserved range,
-- below that n draws.
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
  IF n >= ${o.reserveFrom} THEN
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
    END IF;
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
  SELECT ${s}._accept(pg_sequence_last_value(${gen}), nextval(${seq}), pg_sequence_last_value(${gen}), ${c}.now_ms())
$$;

INSERT INTO ${c}.shards (shard, schema_name, worker, sequence_cache, version)
VALUES (${shard}, '${name}', ${o.worker}, ${o.cache}, '${SQL_VERSION}')
ON CONFLICT (shard) DO UPDATE
  SET worker = EXCLUDED.worker, sequence_cache = EXCLUDED.sequence_cache, version = EXCLUDED.version, updated_at = now();
`
}

/**
 * The SQL that fences a logical shard in the database it is moving away from: afterwards that
 * database never issues another ID of the shard, and `<schema>.shards.fence_value` holds L, the
 * highest sequence value it can ever have issued. The new home must then continue above L
 * (`_advance_to(L)`); `moveShards` does both. Run it in one transaction, after the common SQL of
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
 * // What moveShards runs on the old home (plus a lock_timeout and the destination's name):
 * await client.query(`BEGIN; ${fenceSql({ layout: instagram }, 5)} COMMIT;`)
 * ```
 */
export function fenceSql(options: PostgresSqlOptions | ResolvedSqlOptions, shard: number): string {
  const o = 'lockKey' in options ? options : resolveSqlOptions(options)
  o.sharding.checkShard(shard)
  const n = numbers(o)
  const name = shardSchemaName(shard, o.schemaPrefix)
  const s = quoteIdent('schema', name)
  const c = quoteIdent('schema', o.schema)
  const seq = `'${s}.id_seq'::regclass`
  const gen = `'${s}.id_gen'::regclass`
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

/**
 * The whole script for a layout and a set of logical shards: the common objects, then each shard.
 * Pure: nothing is executed. Run it in one transaction (a migration file, `psql -1 -f`).
 *
 * @example
 * ```ts
 * import { instagram } from '@shardflake/core'
 * import { postgresSql } from '@shardflake/postgres'
 *
 * writeFileSync('migrations/001_ids.sql', postgresSql({ layout: instagram, shards: '0-99' }))
 * ```
 */
export function postgresSql(
  options: PostgresSqlOptions & {
    shards: ShardList
  },
): string {
  const resolved = resolveSqlOptions(options)
  resolved.layout.checkGenerating()
  const shards = readShardList(options.shards, resolved.sharding)
  return [commonSql(resolved), ...shards.map((shard) => shardSql(resolved, shard))].join('\n')
}
