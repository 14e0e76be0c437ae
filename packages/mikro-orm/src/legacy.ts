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
 * the {@link shardedIds} subscriber before the INSERT. Give the property an explicit type in the
 * entity (`bigint`, or `string` with `mode: 'string'`); no reflect-metadata is needed.
 *
 * @example
 * ```ts
 * import { Entity, ManyToOne, Property } from '@mikro-orm/decorators/legacy'
 * import { ShardedId } from '@shardflake/mikro-orm/legacy'
 *
 * @Entity()
 * class Post {
 *   @ShardedId({ shardBy: 'author' }) id!: bigint   // co-located with its author
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
