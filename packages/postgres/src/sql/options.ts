import {
  checkKnownOptions,
  fnv1a32,
  InvalidLayoutError,
  type Layout,
  readInteger,
  readSourceDuration,
  requireSharding,
  type Sharding,
} from '@shardflake/core'
import { checkIdentifier, quoteIdentifier, shardSchemaName } from '../names'

/** The version of the SQL objects this package installs (recorded in the metadata tables). */
export const SQL_VERSION = '8'

/**
 * The oldest installed SQL version a `PostgresSource` draws from: version 7 and earlier can hand
 * out an ID twice when a move of a shard's sequence is cut short (see `docs/next-id.md`, "Waits").
 */
export const MIN_SQL_VERSION = 8

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
   * `now_ms()`, `shard_for_key(key)` and the decode helpers `shardflake_timestamp(id)`, `shardflake_shard(id)`,
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
   * repeated, though), and after each move of the sequence (a catch-up to the clock, a
   * reservation) a session's next draw first drops the values it cached (gaps).
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
   * the clock. One call may take at most (`maxDriftMs` + `maxWaitMs`) x capacity IDs; beyond it
   * the call fails with SQLSTATE `SF006` (overloaded).
   * @default SOURCE_DEFAULTS.maxDriftMs (1000)
   */
  maxDriftMs?: number
  /**
   * The longest one call waits for the clock; beyond it the call fails with SQLSTATE `SF001`
   * and issues nothing. Keep it below the sources' `timeoutMs`.
   * @default SOURCE_DEFAULTS.maxWaitMs (100)
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

/** The names of {@link PostgresSqlOptions}. @internal */
export const SQL_OPTIONS = [
  'sharding',
  'schemaPrefix',
  'schema',
  'worker',
  'cache',
  'marginMs',
  'maxDriftMs',
  'maxWaitMs',
  'reserveFrom',
] as const

/**
 * Validates and fills in the options. With `check`, refuses first an options value that is not
 * an object or has an option that is neither an SQL option nor one of `check.more` (a public
 * function's own, named in the message as `check.where`). @internal
 * @throws InvalidIdentifierError for a schema name or prefix that is not a plain identifier.
 * @throws InvalidLayoutError for a decode-only layout or one whose time field is not above its sequence.
 * @throws TimeExhaustedError for a layout whose time field has run out.
 * @throws InvalidArgumentError for numbers out of range, or an unknown option (with `check`).
 */
export function resolveSqlOptions(
  options: PostgresSqlOptions,
  check?: { where: string; more?: readonly string[] },
): ResolvedSqlOptions {
  // A missing sharding first: its message names logicalShards (a layout alone is not enough).
  const sharding = requireSharding(options?.sharding, 'The PostgreSQL SQL')
  if (check) checkKnownOptions(check.where, options, [...SQL_OPTIONS, ...(check.more ?? [])])
  const { layout } = sharding
  layout.checkGenerating()
  if (layout.order.indexOf('time') > layout.order.indexOf('sequence')) {
    throw new InvalidLayoutError(
      'PostgreSQL next_id() needs the time field above the sequence field, so that IDs grow with the sequence.',
    )
  }
  const schema = checkIdentifier('schema', options.schema ?? 'shardflake')
  const schemaPrefix = options.schemaPrefix ?? 'shard_'
  checkIdentifier('schema prefix', schemaPrefix)
  checkIdentifier('schema prefix', `${schemaPrefix}${layout.shardCount - 1}`)
  return {
    sharding,
    layout,
    schema,
    schemaPrefix,
    worker: readInteger('worker', options.worker, 0, { min: 0, max: layout.workerCount - 1 }),
    cache: readInteger('cache', options.cache, 1, { min: 1, max: 1_000_000 }),
    marginMs: readInteger('marginMs', options.marginMs, 50, { min: 1, max: 3_600_000 }),
    maxDriftMs: readSourceDuration('maxDriftMs', options.maxDriftMs),
    maxWaitMs: readSourceDuration('maxWaitMs', options.maxWaitMs, {
      max: 3_600_000,
    }),
    reserveFrom: readInteger('reserveFrom', options.reserveFrom, 128, {
      min: 1,
      max: 2_147_483_647,
    }),
    lockKey: fnv1a32(`shardflake:${schema}`) | 0,
  }
}

/** Numbers of the layout in the form the SQL uses them. @internal */
export function numbers(o: ResolvedSqlOptions) {
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

/** `(ms - epoch) / unit`, the time field for a ms expression. @internal */
export function timeOf(o: ResolvedSqlOptions, ms: string): string {
  const { epoch, unit } = numbers(o)
  return unit === 1 ? `(${ms} - ${epoch})` : `((${ms} - ${epoch}) / ${unit})`
}

/** A 64-bit pattern as PostgreSQL's signed bigint. @internal */
export function signed(value: bigint): bigint {
  return value >= 1n << 63n ? value - (1n << 64n) : value
}

/** What every routine of one shard's SQL is made of. @internal */
export interface ShardContext {
  o: ResolvedSqlOptions
  layout: Layout
  n: ReturnType<typeof numbers>
  shard: number
  /** The shard's schema name, unquoted. */
  name: string
  /** The shard's schema, quoted. */
  s: string
  /** The common schema, quoted. */
  c: string
  /** The shard's sequence and its seqlock generation, as regclass literals. */
  seq: string
  gen: string
  /** The ID for a sequence value `v` (an SQL expression). */
  compose: (v: string) => string
  /** The clock as a sequence value (ID space). */
  nowV: string
  /**
   * The key pair of the transaction-level advisory lock that guards moves of the sequence while
   * `id_gen` is at generation `g` (an SQL expression): `moveLockKey` in SQL.
   */
  lockOf: (g: string) => string
  /** The key pair of the session-level lock that SQL version 5 and earlier took for moves. */
  legacyLock: string
}

/** Generations that share a move lock key (per shard): the key is the generation mod this. */
export const MOVE_LOCK_SLOTS = 32768

/**
 * The advisory lock key pair that guards moves of shard `shard`'s sequence at generation `g`
 * (what `pg_locks` shows as classid, objid; objsubid 2): the installation's `lockKey` and
 * `(g mod 32768) * 65536 + shard mod 65536`. @internal
 */
export function moveLockKey(o: ResolvedSqlOptions, shard: number, g: bigint): [number, number] {
  return [o.lockKey, Number((g % BigInt(MOVE_LOCK_SLOTS)) * 65536n) + (shard % 65536)]
}

/** The names and numbers of one shard's SQL. @throws ShardOutOfRangeError @internal */
export function shardContext(o: ResolvedSqlOptions, shard: number): ShardContext {
  o.sharding.checkShard(shard)
  const n = numbers(o)
  const name = shardSchemaName(shard, o.schemaPrefix)
  const s = quoteIdentifier('schema', name)
  const c = quoteIdentifier('schema', o.schema)
  const constant = signed((BigInt(shard) << n.shifts.shard) | (BigInt(o.worker) << n.shifts.worker))
  return {
    o,
    layout: o.layout,
    n,
    shard,
    name,
    s,
    c,
    seq: `'${s}.id_seq'::regclass`,
    gen: `'${s}.id_gen'::regclass`,
    compose: (v) =>
      `((${v} >> ${n.S}) << ${n.shifts.time}) | (${constant})::bigint | ((${v} & ${n.seqMask}) << ${n.shifts.sequence})`,
    nowV: `(${timeOf(o, `${c}.now_ms()`)} << ${n.S})`,
    lockOf: (g) =>
      `${o.lockKey}, ((${g}) % ${MOVE_LOCK_SLOTS} * 65536 + ${shard % 65536})::integer`,
    legacyLock: `${o.lockKey}, ${shard}`,
  }
}
