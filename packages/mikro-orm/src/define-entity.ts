import { p } from '@mikro-orm/core'
import {
  adoptOnCreate,
  type ShardedIdOnCreate,
  type ShardedIdRule,
  type ShardedIdSpec,
  shardedIdParts,
} from './sharded-id'

/**
 * The sharded primary key for `defineEntity`: `p.bigint().primary().autoincrement(false)` with
 * the `onCreate` that the {@link shardedIds} subscriber serves. The result is the ordinary
 * property builder, so `.fieldName('...')` and friends can follow. The key is optional in
 * `em.create()`.
 *
 * @example
 * ```ts
 * import { defineEntity, p } from '@mikro-orm/core'
 * import { shardedId } from '@shardflake/mikro-orm'
 *
 * const Post = defineEntity({
 *   name: 'Post',
 *   properties: {
 *     id: shardedId({ shardBy: 'author' }),          // the author's shard
 *     author: () => p.manyToOne(User),
 *     title: p.string(),
 *   },
 * })
 * ```
 */
export function shardedId<T = Record<string, unknown>>(
  options: ShardedIdRule<T> & { mode: 'string' },
): ReturnType<typeof stringKey>
export function shardedId<T = Record<string, unknown>>(
  options: ShardedIdRule<T> & { mode?: 'bigint' },
): ReturnType<typeof bigintKey>
export function shardedId<T = Record<string, unknown>>(
  options: ShardedIdRule<T> & { mode?: 'bigint' | 'string' },
): ReturnType<typeof stringKey> | ReturnType<typeof bigintKey> {
  const { spec, onCreate } = shardedIdParts(options)
  return spec.mode === 'string' ? stringKey(onCreate, spec) : bigintKey(onCreate, spec)
}

// onCreate may leave the key empty (async source, shard key not set yet): the subscriber fills
// it at flush. The casts only tell defineEntity the property's type.
function bigintKey(onCreate: ShardedIdOnCreate, spec: ShardedIdSpec) {
  return p
    .bigint('bigint')
    .primary()
    .autoincrement(false)
    .onCreate(adoptOnCreate((entity: object, em) => onCreate(entity, em) as bigint, spec))
}

function stringKey(onCreate: ShardedIdOnCreate, spec: ShardedIdSpec) {
  return p
    .bigint('string')
    .primary()
    .autoincrement(false)
    .onCreate(adoptOnCreate((entity: object, em) => onCreate(entity, em) as string, spec))
}
