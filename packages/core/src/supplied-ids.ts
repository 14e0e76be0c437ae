/**
 * The one rule every ORM adapter applies to an ID it did not make: a new row whose caller gave the
 * ID, and a stored row whose shard key an update or upsert sets. Either way the ID must name the
 * shard the row's rule gives, unless the write runs inside {@link trustSuppliedIds}.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { MisplacedIdError, ShardKeyChangedError } from './errors'
import { toBigInt } from './id-value'
import type { Sharding } from './sharding'

const trusted = new AsyncLocalStorage<boolean>()

/**
 * Runs `write` (a `save()`, `flush()`, `create()`, `upsert()`... and everything it awaits) with
 * the check of IDs against shard rules turned off: the way to import rows that keep the IDs they
 * already have, whatever shard their keys give today (rows from another system, a restored backup,
 * a merge of two databases). Inside it, an ID the caller gives a new row is kept without comparing
 * its shard with the row's rule, and an update or upsert may set a shard key that no longer
 * matches the shard of the row's ID. IDs are still checked to be 64-bit integers
 * (`InvalidIdError`, `UnsafeNumberError`), and rows without an ID still get one by their rule.
 *
 * The scope follows the async calls `write` makes, so the ORM call must run inside it: with
 * MikroORM, the `flush()`; with Prisma, the awaited query (`trustSuppliedIds` awaits what `write`
 * returns, which is when Prisma runs it).
 *
 * @returns what `write` returns, awaited
 * @example
 * ```ts
 * import { trustSuppliedIds } from '@shardflake/core'
 * declare const posts: { insert(rows: object[]): Promise<unknown> }
 * declare const exported: { id: string; tenantId: string }[]
 *
 * await trustSuppliedIds(() => posts.insert(exported)) // every row keeps its exported ID
 * ```
 */
export async function trustSuppliedIds<T>(write: () => T | PromiseLike<T>): Promise<T> {
  return await trusted.run(true, async () => await write())
}

/** True inside {@link trustSuppliedIds}: adapters then skip {@link checkSuppliedId} and {@link checkKeyChange}. */
export function suppliedIdsTrusted(): boolean {
  return trusted.getStore() === true
}

/**
 * Checks an ID a caller gave a new row against the shard its rule gives. Adapters call it for
 * every new row that arrives with its ID, before anything is written or allocated.
 *
 * @param sharding the application's sharding (`source.sharding`); `undefined` for sources of plain
 *   IDs (ticket servers), whose IDs carry no shard: only the value is checked.
 * @param id the ID as the caller gave it (a `bigint`, a decimal string, or a safe `number`).
 * @param ruleShard the shard the row's rule gives, or `undefined` when the rule cannot be
 *   evaluated yet (the key or parent is not set): the ID is then kept as given.
 * @param row names the row and its rule in the message: `"Post (sameShardAs 'author')"`.
 * @returns the ID, read into a `bigint`
 * @throws InvalidIdError, UnsafeNumberError for a value that is not an exact 64-bit integer.
 * @throws MisplacedIdError when the ID's shard is not `ruleShard` (outside {@link trustSuppliedIds}).
 * @example
 * ```ts
 * import { checkSuppliedId, defineSharding, instagram } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const id = sharding.layout.compose({ timestamp: Date.now(), shard: 7, sequence: 0 })
 * checkSuppliedId(sharding, id, 7, "Post (shardBy 'tenantId')") // id
 * checkSuppliedId(sharding, id, 9, "Post (shardBy 'tenantId')") // throws MisplacedIdError
 * ```
 */
export function checkSuppliedId(
  sharding: Sharding | undefined,
  id: unknown,
  ruleShard: number | undefined,
  row: string,
): bigint {
  const value = toBigInt(id, `The ID of ${row}`)
  if (!sharding || ruleShard === undefined || suppliedIdsTrusted()) return value
  const shard = sharding.layout.shardOf(value)
  if (shard !== ruleShard) {
    throw new MisplacedIdError(
      `The ID ${value} given to a new ${row} is on shard ${shard}, but the rule puts the row on shard ${ruleShard}. Nothing was written. Leave the ID out to get one on shard ${ruleShard}; to import rows that keep the IDs they have, write them inside trustSuppliedIds(() => ...).`,
    )
  }
  return value
}

/**
 * Checks a stored row whose shard key (or parent) an update or upsert sets: the rule, applied to
 * the row as it will be, must give the shard of the row's ID, because an ID never changes shard.
 * Adapters call it before the update is sent, wherever they can see both the row's ID and the
 * new key.
 *
 * @param id the stored row's ID (for an upsert, the ID it conflicts on).
 * @param ruleShard the shard the rule gives with the new key, or `undefined` when it cannot be
 *   evaluated (the key is cleared, the parent is not known): nothing to check.
 * @param row names the row, its rule and the write in the message: `"Keyed (shardBy 'shardKey'), by upsert()"`.
 * @throws ShardKeyChangedError when the shards differ (outside {@link trustSuppliedIds}).
 * @example
 * ```ts
 * import { checkKeyChange, defineSharding, instagram } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const id = sharding.layout.compose({ timestamp: Date.now(), shard: 7, sequence: 0 })
 * checkKeyChange(sharding, id, sharding.shardForKey(71n), "Tenant (shardBy 'number')") // passes: 71 % 64 = 7
 * checkKeyChange(sharding, id, sharding.shardForKey(9n), "Tenant (shardBy 'number')") // throws ShardKeyChangedError
 * ```
 */
export function checkKeyChange(
  sharding: Sharding | undefined,
  id: unknown,
  ruleShard: number | undefined,
  row: string,
): void {
  if (!sharding || ruleShard === undefined || suppliedIdsTrusted()) return
  const value = toBigInt(id, `The ID of ${row}`)
  const shard = sharding.layout.shardOf(value)
  if (shard !== ruleShard) {
    throw new ShardKeyChangedError(
      `${row} ${value}: the new shard key puts the row on shard ${ruleShard}, but its ID is on shard ${shard}, and an ID never changes shard. Nothing was written. Keep the key on shard ${shard}, or write a new row (with a new ID) under the new key and delete this one. (A row imported with an ID on another shard than its key's is updated inside trustSuppliedIds(() => ...).)`,
    )
  }
}
