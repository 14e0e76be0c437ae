import type { EntityData, EntityManager, EntityName, RequiredEntityData } from '@mikro-orm/core'
import { ConfigurationError } from '@shardflake/core'
import { ShardedIdSubscriber } from './subscriber'

type Row = Record<string, unknown>

/**
 * Gives rows for `em.insert`, `em.insertMany` and `qb.insert()` their sharded IDs (those paths
 * run no hooks). Rows use property names; a relation may hold an entity, a reference or the
 * parent's primary key. Rows that already have an ID keep it. One `nextIds` per shard.
 *
 * @example
 * ```ts
 * const rows = await assignShardedIds(em, Post, [{ author: authorId, title: 'a' }, { author: authorId, title: 'b' }])
 * await em.insertMany(Post, rows)
 * ```
 */
export async function assignShardedIds<T extends object, R extends EntityData<T>>(
  em: EntityManager,
  entityName: EntityName<T>,
  rows: R[],
): Promise<(R & RequiredEntityData<T>)[]>
export async function assignShardedIds<T extends object, R extends EntityData<T>>(
  em: EntityManager,
  entityName: EntityName<T>,
  row: R,
): Promise<R & RequiredEntityData<T>>
export async function assignShardedIds<T extends object, R extends EntityData<T>>(
  em: EntityManager,
  entityName: EntityName<T>,
  rows: R | R[],
): Promise<R | R[]> {
  const subscriber = subscriberOf(em)
  const list: Row[] = (Array.isArray(rows) ? rows : [rows]).map((row) => row as Row)
  await subscriber.assignRows(list, em.getMetadata().get(entityName))
  return rows
}

function subscriberOf(em: EntityManager): ShardedIdSubscriber {
  for (const subscriber of em.getEventManager().getSubscribers()) {
    if (subscriber instanceof ShardedIdSubscriber) return subscriber
  }
  throw new ConfigurationError(
    'MikroORM has no shardedIds(): add `extensions: [shardedIds({ source })]` to MikroORM.init().',
  )
}
