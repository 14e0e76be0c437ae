/**
 * `@ShardedId()` for legacy (TypeScript `experimentalDecorators`) entity classes, built on
 * `PrimaryKey` from `@mikro-orm/decorators/legacy`.
 *
 * @module
 */
import { PrimaryKey } from '@mikro-orm/decorators/legacy'
import { primaryKeyOptions, type ShardedIdOptions } from './sharded-id'

/**
 * Declares the 64-bit sharded primary key: a BIGINT column that is not autoincrement, filled by
 * the `shardedIds()` extension before the INSERT. Give the property an explicit type in the
 * entity (`bigint`, or `string` with `idType: 'string'`). `@mikro-orm/decorators/legacy`, which this
 * builds on, loads `reflect-metadata`: install it (nothing reads it for these keys).
 *
 * @example
 * ```ts
 * import { Entity, ManyToOne, Property } from '@mikro-orm/decorators/legacy'
 * import { ShardedId } from '@shardflake/mikro-orm/legacy'
 *
 * @Entity()
 * class Post {
 *   @ShardedId({ sameShardAs: 'author' }) id!: bigint   // on its author's shard
 *   @ManyToOne(() => User) author!: User
 *   @Property({ type: 'string' }) title!: string
 * }
 * ```
 */
export function ShardedId<T extends object = object>(
  options: ShardedIdOptions<T>,
): (target: object, propertyName: string) => void {
  return PrimaryKey<object>(primaryKeyOptions(options))
}

export type { ShardedIdOptions, ShardedIdRule } from './sharded-id'
