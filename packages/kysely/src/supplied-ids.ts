/**
 * The rule for an ID the plugin did not make: the one a caller gives a new row, and the one of a
 * stored row whose shard key an update or upsert sets. Either must name the shard the row's rule
 * gives, unless the write runs inside {@link trustSuppliedIds}.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { InvalidIdError, type Sharding, ShardKeyChangedError, toBigInt } from '@shardflake/core'

const trusted = new AsyncLocalStorage<boolean>()

/**
 * Runs `write` (and everything it awaits) without comparing the shard of IDs the caller gives new
 * rows with their rule: the way to import rows that keep the IDs they already have (rows from
 * another system, a restored backup). IDs are still checked to be 64-bit integers, and rows
 * without an ID still get one by their rule.
 *
 * @returns what `write` returns, awaited
 * @example
 * ```ts
 * import { trustSuppliedIds } from '@shardflake/kysely'
 * import type { Kysely } from 'kysely'
 * declare const db: Kysely<{ posts: { id: string; author_id: string; title: string } }>
 * declare const exported: { id: string; author_id: string; title: string }[]
 *
 * await trustSuppliedIds(() => db.insertInto('posts').values(exported).execute())
 * ```
 */
export async function trustSuppliedIds<T>(write: () => T | PromiseLike<T>): Promise<T> {
  return await trusted.run(true, async () => await write())
}

/**
 * Checks an ID a caller gave a new row against the shard its rule gives (`undefined`: the rule
 * cannot be evaluated, the ID is kept as given).
 * @returns the ID as a `bigint`
 * @throws InvalidIdError, UnsafeNumberError for a value that is not an exact 64-bit integer, and
 *   InvalidIdError when its shard is not `ruleShard` (outside {@link trustSuppliedIds}).
 */
export function checkSuppliedId(
  sharding: Sharding | undefined,
  id: unknown,
  ruleShard: number | undefined,
  row: string,
): bigint {
  const value = toBigInt(id, `The ID of ${row}`)
  if (!sharding || ruleShard === undefined || trusted.getStore() === true) return value
  const shard = sharding.layout.shardOf(value)
  if (shard !== ruleShard) {
    throw new InvalidIdError(
      `The ID ${value} given to a new row of ${row} is on shard ${shard}, but the rule puts the row on shard ${ruleShard}. Nothing was written. Leave the ID out to get one on shard ${ruleShard}; to import rows that keep the IDs they have, write them inside trustSuppliedIds(() => ...).`,
    )
  }
  return value
}

/**
 * Checks a stored row whose shard key (or parent) an update or upsert sets: the rule, applied to
 * the new key, must give the shard of the row's ID, because an ID never changes shard
 * (`undefined`: the new key cannot be evaluated, nothing to check).
 * @throws ShardKeyChangedError when the shards differ (outside {@link trustSuppliedIds}).
 */
export function checkKeyChange(
  sharding: Sharding | undefined,
  id: unknown,
  ruleShard: number | undefined,
  row: string,
): void {
  if (!sharding || ruleShard === undefined || trusted.getStore() === true) return
  const value = toBigInt(id, `The ID of ${row}`)
  const shard = sharding.layout.shardOf(value)
  if (shard !== ruleShard) {
    throw new ShardKeyChangedError(
      `${row} ${value}: the new shard key puts the row on shard ${ruleShard}, but its ID is on shard ${shard}, and an ID never changes shard. Nothing was written. Keep the key on shard ${shard}, or write a new row (with a new ID) under the new key and delete this one.`,
    )
  }
}
