import { p } from '@mikro-orm/core'
import {
  adoptOnCreate,
  type ShardedIdOnCreate,
  type ShardedIdRule,
  type ShardedIdSpec,
  shardedIdParts,
} from './sharded-id'

/**
 * The sharded primary key for `defineEntity`: a BIGINT primary key, not autoincrement, with the
 * `onCreate` that `shardedIds()` serves. The result is the ordinary property builder. The key is
 * optional in `em.create()`. Give `idType: 'string'` for decimal-string keys (the TypeScript type
 * follows it); chain `.fieldName('...')` for another column name.
 *
 * @example
 * ```ts
 * import { defineEntity, p } from '@mikro-orm/core'
 * import { shardedId } from '@shardflake/mikro-orm'
 *
 * const Post = defineEntity({
 *   name: 'Post',
 *   properties: {
 *     id: shardedId({ sameShardAs: 'author' }),      // the author's shard
 *     author: () => p.manyToOne(User),
 *     title: p.string(),
 *   },
 * })
 * ```
 */
export function shardedId<T = Record<string, unknown>>(
  options: ShardedIdRule<T> & { idType: 'string' },
): ReturnType<typeof key<'string'>>
export function shardedId<T = Record<string, unknown>>(
  options: ShardedIdRule<T> & { idType?: 'bigint' },
): ReturnType<typeof key<'bigint'>>
export function shardedId<T = Record<string, unknown>>(
  options: ShardedIdRule<T> & { idType?: 'bigint' | 'string' },
): ReturnType<typeof key<'string'>> | ReturnType<typeof key<'bigint'>> {
  const { spec, onCreate } = shardedIdParts(options)
  return spec.idType === 'string' ? key('string', onCreate, spec) : key('bigint', onCreate, spec)
}

// onCreate may leave the key empty (async source, shard key not set yet): the subscriber fills
// it at flush. The casts only tell defineEntity the property's type.
function key<M extends 'bigint' | 'string'>(
  mode: M,
  onCreate: ShardedIdOnCreate,
  spec: ShardedIdSpec,
) {
  return p
    .bigint(mode)
    .type(spec.type)
    .primary()
    .autoincrement(false)
    .onCreate(adoptOnCreate((entity: object, em) => onCreate(entity, em) as never, spec))
}
