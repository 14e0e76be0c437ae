import {
  checkKnownOptions,
  InvalidArgumentError,
  InvalidLayoutError,
  type Layout,
  readSourceDuration,
  requireSharding,
  type Sharding,
} from '@shardflake/core'
import { checkSchemaPrefix } from '../identifiers'

/** Which server the SQL is written for. */
export type MysqlDialect = 'mariadb' | 'mysql8'

/** Storage engine of the per-shard counter row. */
export type CounterEngine = 'Aria' | 'MyISAM' | 'InnoDB'

/** What every MySQL SQL generator, the installer and the move take. */
export interface MysqlSqlOptions {
  /**
   * The application's sharding (`defineSharding({ layout, logicalShards })`): the layout of the
   * IDs (time highest, sequence lowest) and the number of logical shards keys are spread over.
   * Both are recorded in every shard database and checked by `MysqlSource`.
   */
  sharding: Sharding
  /**
   * Which server the SQL is for. Where MariaDB 10.6+ and MySQL 8 differ (CREATE OR REPLACE, the
   * row generator of `next_ids`, the counter's engine) the SQL differs.
   * @default 'mariadb'
   */
  dialect?: MysqlDialect
  /**
   * The database of logical shard `n` is `${schemaPrefix}${n}`.
   * @default 'shard_'
   */
  schemaPrefix?: string
  /**
   * How far (in ms) the counter may run ahead of the server clock: bursts above 2^sequenceBits IDs
   * per time unit borrow the next ones, and a clock that stepped back is absorbed up to this.
   * Past it the routines refuse and issue nothing.
   * @default 1000
   */
  maxDriftMs?: number
  /**
   * Engine of the counter row. Defaults: `Aria` on MariaDB (non-transactional: its table lock ends
   * with the statement, no fsync per call), `InnoDB` on MySQL 8 (durable; its row lock lasts until
   * the calling transaction commits).
   * @default 'Aria' (mariadb), 'InnoDB' (mysql8)
   */
  counterEngine?: CounterEngine
}

/** Options with defaults applied. @internal */
export interface ResolvedSqlOptions {
  readonly sharding: Sharding
  readonly layout: Layout
  readonly dialect: MysqlDialect
  readonly schemaPrefix: string
  readonly maxDriftMs: number
  readonly counterEngine: CounterEngine
}

/** The names of {@link MysqlSqlOptions}. @internal */
export const SQL_OPTIONS = [
  'sharding',
  'dialect',
  'schemaPrefix',
  'maxDriftMs',
  'counterEngine',
] as const

/**
 * Refuses options that are not an object, or hold an option that is neither an SQL option nor
 * one of `more` (the function's own), naming the closest known one. @internal
 * @throws InvalidArgumentError
 */
export function checkSqlOptions(who: string, options: unknown, more: readonly string[] = []): void {
  // A missing sharding first: its message names logicalShards (a layout alone is not enough).
  requireSharding((options as Partial<MysqlSqlOptions> | null | undefined)?.sharding, who)
  checkKnownOptions(`${who} options`, options, [...SQL_OPTIONS, ...more])
}

/** @internal */
export function resolveSqlOptions(
  options: MysqlSqlOptions,
  who = 'The MySQL SQL',
): ResolvedSqlOptions {
  const sharding = requireSharding(options?.sharding, who)
  const { layout } = sharding
  checkGeneratingLayout(layout)
  const dialect = options.dialect ?? 'mariadb'
  if (dialect !== 'mariadb' && dialect !== 'mysql8') {
    throw new InvalidArgumentError(
      `dialect must be 'mariadb' or 'mysql8', got ${JSON.stringify(dialect)}.`,
    )
  }
  const schemaPrefix = checkSchemaPrefix(options.schemaPrefix ?? 'shard_', layout.shardCount - 1)
  const maxDriftMs = readSourceDuration('maxDriftMs', options.maxDriftMs, {
    min: layout.timeUnitMs,
  })
  const counterEngine = options.counterEngine ?? (dialect === 'mariadb' ? 'Aria' : 'InnoDB')
  if (!['Aria', 'MyISAM', 'InnoDB'].includes(counterEngine)) {
    throw new InvalidArgumentError(`counterEngine must be Aria, MyISAM or InnoDB.`)
  }
  if (counterEngine === 'Aria' && dialect === 'mysql8') {
    throw new InvalidArgumentError('MySQL 8 has no Aria engine: use InnoDB or MyISAM.')
  }
  return { sharding, layout, dialect, schemaPrefix, maxDriftMs, counterEngine }
}

/**
 * Throws unless the routines can make IDs of this layout now: not decode-only, time not used up
 * (`layout.checkGenerating()`), fields in the default order, time and sequence in one BIGINT.
 * @throws InvalidLayoutError
 * @throws TimeExhaustedError
 * @internal
 */
export function checkGeneratingLayout(layout: Layout): void {
  layout.checkGenerating()
  if (layout.order.join() !== 'time,shard,worker,sequence') {
    throw new InvalidLayoutError(
      'The MySQL routines need the field order time, shard, worker, sequence (the default).',
    )
  }
  if (layout.timeBits + layout.sequenceBits > 62) {
    throw new InvalidLayoutError(
      'The MySQL routines keep time and sequence in one BIGINT counter: timeBits + sequenceBits must be at most 62.',
    )
  }
}

/**
 * A string that is equal for two layouts exactly when they make the same IDs; recorded in
 * `sf_meta` next to `logical_shards` so the installer, the install script and `MysqlSource` can
 * refuse another sharding.
 */
export function layoutKey(layout: Layout): string {
  return [
    `epoch=${layout.epoch}`,
    `unit=${layout.timeUnitMs}`,
    `bits=${layout.timeBits}/${layout.shardBits}/${layout.workerBits}/${layout.sequenceBits}`,
    `order=${layout.order.join(',')}`,
  ].join(';')
}

/**
 * The first counter value past the layout's time field. A counter at or below it is live; a
 * fenced counter (a shard moved away) holds `L + limit + 1`, where `L` was its last value. @internal
 */
export function counterLimit(layout: Layout): bigint {
  return BigInt(layout.timeLimit) << BigInt(layout.sequenceBits)
}

/** A SQL string literal. @internal */
export function sqlString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`
}
