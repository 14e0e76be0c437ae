/**
 * `@ShardedId()` for MikroORM 6.6 entity classes, built on `PrimaryKey` from `@mikro-orm/core`
 * (where MikroORM 6 keeps its legacy decorators). On MikroORM 7 use `@shardflake/mikro-orm/legacy`
 * or `/es`. `shardedId()` (defineEntity), `shardedIds()` and `assignShardedIds()` from
 * `@shardflake/mikro-orm` work on both.
 *
 * @module
 */
import * as core from '@mikro-orm/core'
import { ConfigurationError } from '@shardflake/core'
import { primaryKeyOptions, type ShardedIdOptions } from './sharded-id'

type LegacyPrimaryKey = (options: object) => (target: object, propertyName: string) => void

/**
 * Declares the 64-bit sharded primary key on a MikroORM 6 entity class (TypeScript
 * `experimentalDecorators`): a BIGINT column that is not autoincrement, filled by the
 * `shardedIds()` extension before the INSERT. MikroORM 6 runs `onCreate` at flush, not at
 * `em.create()`, so the ID is known after `flush()` whatever the source.
 *
 * @throws ConfigurationError on MikroORM 7, whose `@mikro-orm/core` has no decorators.
 * @example
 * ```ts
 * import { Entity, ManyToOne, Property } from '@mikro-orm/core'
 * import { ShardedId } from '@shardflake/mikro-orm/v6'
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
  // Read from the namespace: MikroORM 7's typings (which this package compiles against) have no
  // PrimaryKey in @mikro-orm/core.
  const PrimaryKey: unknown = Reflect.get(core, 'PrimaryKey')
  if (typeof PrimaryKey !== 'function') {
    throw new ConfigurationError(
      '@shardflake/mikro-orm/v6 is for MikroORM 6, whose decorators live in @mikro-orm/core. On MikroORM 7 import ShardedId from @shardflake/mikro-orm/legacy (or /es).',
    )
  }
  return (PrimaryKey as LegacyPrimaryKey)(primaryKeyOptions(options))
}

export type { ShardedIdOptions, ShardedIdRule } from './sharded-id'
