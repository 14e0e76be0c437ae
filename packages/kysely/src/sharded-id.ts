import type { ColumnType } from 'kysely'

/**
 * The type of a sharded key column in your `DB` interface: read as a decimal string (what
 * node-postgres returns for `BIGINT`, and mysql2 with `bigNumberStrings: true`), optional on
 * insert (the plugin fills it when left out or `null`; an ID you give may be a `bigint` or a
 * decimal string), and never updated: an ID names its row's shard for good.
 *
 * @example
 * ```ts
 * import type { ShardedId } from '@shardflake/kysely'
 *
 * interface Database {
 *   posts: { id: ShardedId; author_id: string; title: string }
 * }
 * ```
 */
export type ShardedId<Read extends string | bigint = string> = ColumnType<
  Read,
  bigint | string | null | undefined,
  never
>
