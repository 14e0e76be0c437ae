/**
 * The `shardColumn` option of a shard rule: a column of its own that receives the row's logical
 * shard, the one inside its ID. Distributed engines (Citus, Vitess, PgDog) route by whole column
 * values and cannot read the shard bits out of the middle of a 64-bit ID; they route by this
 * column instead. Every adapter fills it on insert and refuses a value that disagrees with the ID.
 */
import {
  InvalidArgumentError,
  InvalidShardRuleError,
  MisplacedIdError,
  ShardKeyChangedError,
} from './errors'
import { toBigInt } from './id-value'
import { describeValue } from './known-options'
import type { Sharding } from './sharding'

/**
 * The name of the property a rule's `shardColumn` names, or `undefined` when the rule has none.
 * Does not check it: {@link checkShardColumn} does, when the entity is defined.
 * @example
 * ```ts
 * import { shardColumnOf } from '@shardflake/core'
 *
 * shardColumnOf({ shardBy: 'tenantId', shardColumn: 'lshard' }) // 'lshard'
 * shardColumnOf({ shardBy: 'tenantId' }) // undefined
 * ```
 */
export function shardColumnOf(rule: unknown): string | undefined {
  if (typeof rule !== 'object' || rule === null) return undefined
  const column = (rule as { shardColumn?: unknown }).shardColumn
  return typeof column === 'string' ? column : undefined
}

/**
 * Checks a rule's `shardColumn` when an entity is defined: a non-empty property name that is
 * neither the ID nor the field the rule reads the shard from, and, when the adapter knows the
 * entity's properties, one of them.
 * @param entityName named in messages.
 * @param known `fields`: the entity's properties, when the tool lets the adapter see them;
 *   `idField`: the sharded ID's property.
 * @returns the column's property name, or `undefined` when the rule has no `shardColumn`.
 * @throws InvalidShardRuleError
 * @example
 * ```ts
 * import { checkShardColumn } from '@shardflake/core'
 *
 * checkShardColumn({ shardBy: 'tenantId', shardColumn: 'lshard' }, 'Post', { fields: ['id', 'tenantId', 'lshard'] }) // 'lshard'
 * checkShardColumn({ shardBy: 'tenantId', shardColumn: 'lshrad' }, 'Post', { fields: ['id', 'tenantId', 'lshard'] }) // throws InvalidShardRuleError
 * ```
 */
export function checkShardColumn(
  rule: unknown,
  entityName: string,
  known: { readonly fields?: readonly string[]; readonly idField?: string } = {},
): string | undefined {
  if (typeof rule !== 'object' || rule === null) return undefined
  const column = (rule as { shardColumn?: unknown }).shardColumn
  if (column === undefined) return undefined
  const fail = (why: string): never => {
    throw new InvalidShardRuleError(
      `The shardColumn of ${entityName} ${why}. It names the property (an integer column) that receives the logical shard of each row's ID, for engines that route by a whole column value.`,
    )
  }
  if (typeof column !== 'string' || column.trim() === '') {
    return fail(`is ${describeValue(column)}, not a property name`)
  }
  if (known.idField !== undefined && column === known.idField) {
    return fail(`is '${column}', the ID itself`)
  }
  for (const key of ['shardBy', 'sameShardAs'] as const) {
    if ((rule as Record<string, unknown>)[key] === column) {
      return fail(`is '${column}', the field the rule reads the shard from (${key})`)
    }
  }
  if (known.fields && !known.fields.includes(column)) {
    return fail(
      `names '${column}', which ${entityName} does not have (its properties: ${known.fields.join(', ')})`,
    )
  }
  return column
}

/**
 * Reads a value of a shard column as a shard number.
 * @throws InvalidArgumentError when it is not an integer (a `number`, a `bigint` or a digit string).
 */
function readShardValue(value: unknown, what: string): number {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return value
  if (typeof value === 'bigint') return Number(value)
  if (typeof value === 'string' && /^\s*-?\d{1,15}\s*$/.test(value)) return Number(value)
  throw new InvalidArgumentError(
    `${what} must be an integer (the logical shard of the row's ID), got ${describeValue(value)}.`,
  )
}

/**
 * Fills the shard column of a new row with the logical shard of its ID, or checks the value the
 * caller set. Adapters call it for every row they insert, once the row has its ID, before
 * anything is written. The column always holds the ID's shard, inside `trustSuppliedIds` too:
 * it is what the engine routes by, and the ID is where the row lives.
 * @param sharding the application's sharding.
 * @param row the new row (entity, data object); its `column` is set when `null` or `undefined`.
 * @param column the property the rule's `shardColumn` names.
 * @param id the row's ID.
 * @param label names the row in messages: `"Post (shardBy 'tenantId')"`.
 * @returns the ID's shard
 * @throws MisplacedIdError when the row already holds another shard.
 * @throws InvalidArgumentError when the row holds a value that is not an integer.
 * @example
 * ```ts
 * import { defineSharding, fillShardColumn, instagram } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const id = sharding.layout.compose({ timestamp: Date.now(), shard: 7, sequence: 0 })
 * const row: { id: bigint; lshard?: number } = { id }
 * fillShardColumn(sharding, row, 'lshard', id, 'Post') // 7, and row.lshard === 7
 * ```
 */
export function fillShardColumn(
  sharding: Sharding,
  row: object,
  column: string,
  id: unknown,
  label: string,
): number {
  const shard = sharding.layout.shardOf(toBigInt(id, `The ID of ${label}`))
  return setShardColumn(row, column, shard, label, `its ID ${String(id)} is`)
}

/**
 * {@link fillShardColumn} before the row has its ID: fills the shard column with the shard the
 * row's ID will be on (the one its rule gives), or checks the value the caller set, so that a
 * wrong value fails before any ID is spent.
 * @param whose says in messages where `shard` comes from. @default 'its rule puts it'
 * @returns `shard`
 * @throws MisplacedIdError when the row already holds another shard.
 * @throws InvalidArgumentError when the row holds a value that is not an integer.
 * @example
 * ```ts
 * import { setShardColumn } from '@shardflake/core'
 *
 * const row: { tenantId: number; lshard?: number } = { tenantId: 71 }
 * setShardColumn(row, 'lshard', 7, 'Post') // 7, and row.lshard === 7
 * setShardColumn({ lshard: 3 }, 'lshard', 7, 'Post') // throws MisplacedIdError
 * ```
 */
export function setShardColumn(
  row: object,
  column: string,
  shard: number,
  label: string,
  whose = 'its rule puts it',
): number {
  const record = row as Record<string, unknown>
  const given = record[column]
  if (given === undefined || given === null) {
    record[column] = shard
    return shard
  }
  const value = readShardValue(given, `The shard column '${column}' of a new ${label}`)
  if (value !== shard) {
    throw new MisplacedIdError(
      `The shard column '${column}' of a new ${label} holds ${value}, but ${whose} on shard ${shard}. Nothing was written. Leave '${column}' out: it is filled with the shard of the row's ID.`,
    )
  }
  return shard
}

/**
 * Checks a value an update (or the update half of an upsert) writes to a stored row's shard
 * column: it must stay the shard of the row's ID, because an ID never changes shard.
 * Adapters call it where they check shard key changes, before the update is sent.
 * @param id the stored row's ID.
 * @param value the value written; `undefined` (not written) passes.
 * @param label names the row and the write in messages: `"Post (shardBy 'tenantId'), saved"`.
 * @throws ShardKeyChangedError when the value is another shard.
 * @throws InvalidArgumentError when it is not an integer (`null` included).
 * @example
 * ```ts
 * import { checkShardColumnChange, defineSharding, instagram } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const id = sharding.layout.compose({ timestamp: Date.now(), shard: 7, sequence: 0 })
 * checkShardColumnChange(sharding, id, 'lshard', 7, 'Post') // passes
 * checkShardColumnChange(sharding, id, 'lshard', 9, 'Post') // throws ShardKeyChangedError
 * ```
 */
export function checkShardColumnChange(
  sharding: Sharding,
  id: unknown,
  column: string,
  value: unknown,
  label: string,
): void {
  if (value === undefined) return
  const shard = sharding.layout.shardOf(toBigInt(id, `The ID of ${label}`))
  const written = readShardValue(value, `The shard column '${column}' of ${label}`)
  if (written !== shard) {
    throw new ShardKeyChangedError(
      `${label} ${String(id)}: the write sets its shard column '${column}' to ${written}, but its ID is on shard ${shard}, and an ID never changes shard. Nothing was written. Leave '${column}' out of the write.`,
    )
  }
}
