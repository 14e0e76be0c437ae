import {
  checkKeyChange,
  checkShardColumnChange,
  checkSuppliedId,
  InvalidArgumentError,
  MissingShardKeyError,
  type Sharding,
  type ShardRule,
  setShardColumn,
  shardColumnOf,
  toSigned64,
} from '@shardflake/core'
import type { TableSpec } from './tables'

/** A column given as SQL (a reference, a subquery, `sql\`...\``): its value is not known before the query runs. */
export const SQL_EXPRESSION: unique symbol = Symbol('an SQL expression')

/** No key placed yet. */
const NO_KEY: unique symbol = Symbol('no key')

/** One new row as the plugin reads it: column name to value, or {@link SQL_EXPRESSION}. */
export type RowValues = Record<string, unknown>

/**
 * Where the new rows of one table go: the shard rule applied to each row, and the check of IDs
 * the caller gave. Nothing here allocates; callers plan every row first, so that a bad row
 * leaves nothing allocated or written.
 */
export class Placement {
  /** The column a rule names (`shardBy: 'email'`), if it names one. */
  readonly field: string | undefined
  /** The last key (or parent ID) placed and its shard: rows of one batch often share them. */
  #lastKey: unknown = NO_KEY
  #lastShard = 0

  /** The rule's `shardColumn`, which receives the logical shard of each new row's ID. */
  readonly shardColumn: string | undefined

  constructor(
    readonly spec: TableSpec,
    /** `undefined` for sources of plain IDs (ticket servers): shard rules do not apply. */
    readonly sharding: Sharding | undefined,
  ) {
    this.field = fieldOf(spec.rule)
    this.shardColumn = sharding ? shardColumnOf(spec.rule) : undefined
  }

  /**
   * Checks the shard column value a new row carries against the shard of its ID (`shard`).
   * @returns true when the row has no value there (the plugin writes `shard`)
   * @throws MisplacedIdError when it carries another shard
   * @throws InvalidArgumentError when it is not an integer, or SQL (not known before the query runs)
   */
  checkShardColumn(value: unknown, shard: number): boolean {
    const column = this.shardColumn!
    if (value === SQL_EXPRESSION) {
      throw new InvalidArgumentError(
        `The shard column '${column}' of a new row of ${this.spec.label} is an SQL expression: leave it out (the plugin fills it with the shard of the row's ID) or pass the value.`,
      )
    }
    const row = { [column]: value }
    setShardColumn(row, column, shard, this.spec.label, "the row's ID is")
    return value === undefined || value === null
  }

  /**
   * Checks a write that sets a stored row's shard column: the value must stay its ID's shard.
   * @throws ShardKeyChangedError
   */
  checkShardColumnMove(id: unknown, value: unknown, write: string): void {
    if (!this.sharding || !this.shardColumn || value === SQL_EXPRESSION) return
    checkShardColumnChange(
      this.sharding,
      id,
      this.shardColumn,
      value,
      `${this.spec.label}, by ${write},`,
    )
  }

  /**
   * The logical shard of a new row without an ID.
   * @throws MissingShardKeyError when the key or the parent ID is not set, or is given as SQL.
   * @throws InvalidIdError, UnsafeNumberError for a parent ID that is not an exact 64-bit integer.
   */
  shardOf(row: RowValues): number {
    const { sharding, field } = this
    if (!sharding) return 0
    const { rule, label, name } = this.spec
    if (field === undefined) {
      return sharding.resolveShard(rule, 'shard' in rule ? row : plainValues(row), name)
    }
    const key = row[field]
    if (key === SQL_EXPRESSION) {
      throw new MissingShardKeyError(
        `The ${'shardBy' in rule ? 'shard key' : 'parent ID'} of a new row of ${label} is an SQL expression, whose value is not known before the INSERT runs. Pass the value itself (select it first), or give the row its ID.`,
      )
    }
    if (key === this.#lastKey) return this.#lastShard
    const shard = sharding.resolveShard(rule, row, name)
    if (typeof key === 'string' || typeof key === 'bigint' || typeof key === 'number') {
      this.#lastKey = key
      this.#lastShard = shard
    }
    return shard
  }

  /**
   * Checks an ID the caller gave a new row: an exact 64-bit integer, on the shard the rule gives
   * when the rule can be evaluated (a row whose key is missing keeps the ID it was given).
   * @returns the ID as the signed 64-bit value a BIGINT column stores
   * @throws InvalidIdError, UnsafeNumberError for a value that is not an exact 64-bit integer
   * @throws MisplacedIdError when it is on another shard (outside `trustSuppliedIds`)
   */
  checkId(row: RowValues, id: unknown): bigint {
    return toSigned64(checkSuppliedId(this.sharding, id, this.ruleShard(row), this.spec.label))
  }

  /**
   * Checks a stored row whose rule's column a write sets to `key`: the ID must stay on the shard
   * the new key gives (a key that is not a value, or a rule that is a function, is not checked).
   * @param write names the write in the message: `'an update'`.
   * @throws ShardKeyChangedError
   */
  checkMove(id: unknown, key: unknown, write: string): void {
    if (this.field === undefined || key === SQL_EXPRESSION) return
    const shard = this.ruleShard({ [this.field]: key })
    checkKeyChange(this.sharding, id, shard, `${this.spec.label}, by ${write},`)
  }

  /** The shard the rule gives, or `undefined` when its key or parent is not known. */
  private ruleShard(row: RowValues): number | undefined {
    if (!this.sharding) return undefined
    if (this.field !== undefined) {
      const value = row[this.field]
      if (value === null || value === undefined || value === SQL_EXPRESSION) return undefined
    }
    try {
      return this.shardOf(row)
    } catch (error) {
      if (error instanceof MissingShardKeyError) return undefined
      throw error
    }
  }
}

/** The column a rule names, if it names one. */
function fieldOf(rule: ShardRule<RowValues>): string | undefined {
  const field =
    'shardBy' in rule ? rule.shardBy : 'sameShardAs' in rule ? rule.sameShardAs : undefined
  return typeof field === 'string' ? field : undefined
}

/** The row without its SQL expressions, as a rule function sees it. */
function plainValues(row: RowValues): RowValues {
  for (const value of Object.values(row)) {
    if (value === SQL_EXPRESSION) {
      return Object.fromEntries(Object.entries(row).filter(([, v]) => v !== SQL_EXPRESSION))
    }
  }
  return row
}
