/**
 * `@ShardedId()` for standard (TC39, TypeScript 5+ without `experimentalDecorators`) entity
 * classes, built on `PrimaryKey` from `@mikro-orm/decorators/es`.
 *
 * @module
 */
import { PrimaryKey } from '@mikro-orm/decorators/es'
import { primaryKeyOptions, type ShardedIdOptions } from './sharded-id'

/**
 * Declares the 64-bit sharded primary key: a BIGINT column that is not autoincrement, filled by
 * the `shardedIds()` extension before the INSERT.
 *
 * @example
 * ```ts
 * import { Entity, ManyToOne, Property } from '@mikro-orm/decorators/es'
 * import { ShardedId } from '@shardflake/mikro-orm/es'
 *
 * @Entity()
 * class Comment {
 *   @ShardedId({ sameShardAs: 'post' }) id!: bigint   // on its post's shard
 *   @ManyToOne(() => Post) post!: Post
 *   @Property({ type: 'string' }) body!: string
 * }
 * ```
 */
export function ShardedId<T extends object = object>(
  options: ShardedIdOptions<T>,
): (value: unknown, context: ClassFieldDecoratorContext<object>) => void {
  return PrimaryKey<object>(primaryKeyOptions(options))
}

export type { ShardedIdOptions, ShardedIdRule } from './sharded-id'
