import type { IdSource, ShardDirectory, Sharding, ShardMap } from '@shardflake/core'
import type { OrmId } from '../blog'
import type { Dialect } from '../databases'
import type { RoutedSourceCase } from './routed-sources'

/**
 * The blog of {@link BlogThroughOrm}, spread over several servers: the ORM under test holds one
 * handle per server (a DataSource, a PrismaClient, ...), hands them to core's `ShardHomes` with
 * the suite's directory, and writes every row on the server holding its shard. The tables and rules are
 * those of `blogSchemaSql` (authors `shardBy: 'email'`, posts `sameShardAs` their author, comments
 * `sameShardAs` their post, keyed `shardBy: 'shardKey'`).
 *
 * Every method goes through the adapter's own routed API, never around it. Methods that create
 * return the IDs the entities carry after the call, in the ORM's type ({@link idType}).
 */
export interface RoutedBlogThroughOrm {
  /** What the ORM uses for BIGINT keys. */
  readonly idType: 'string' | 'bigint'
  /** Inserts one author, on the server of the shard its email gives. */
  createAuthor(email: string): Promise<OrmId>
  /**
   * Inserts many posts (each of an existing author, referenced by ID) in ONE call of the adapter's
   * routed API: the adapter splits it into one call per server, each a single INSERT statement.
   */
  createPosts(posts: readonly { authorId: OrmId; title: string }[]): Promise<OrmId[]>
  /** Inserts a post and its comments in ONE call (cascade, nested create), on the author's server. */
  createPostWithComments(
    post: { authorId: OrmId; title: string },
    comments: readonly string[],
  ): Promise<{ postId: OrmId; commentIds: OrmId[] }>
  /** Inserts one `Keyed` row with this shard key, on the server of the shard the key gives. */
  createKeyed(shardKey: string): Promise<OrmId>
  /**
   * Reads the post `postId` with its comments (a relation load) from the server holding its
   * shard, found from the ID alone; `undefined` when there is none.
   */
  findPostWithComments(
    postId: OrmId,
  ): Promise<{ title: string; comments: readonly string[] } | undefined>
  /**
   * Inside ONE transaction on the server holding the first post's author, inserts the posts one
   * after another. A post whose author lives on another server must be refused with a typed
   * error whose `code` is `'WRONG_SERVER'` before it is written, and the transaction rolled back.
   */
  createPostsInTransaction(posts: readonly { authorId: OrmId; title: string }[]): Promise<void>
  /**
   * The IDs of the `limit` newest posts of every server, newest first: an explicit fan-out
   * (core's `ShardHomes.fanOut`, ordered by ID with a limit).
   */
  newestPosts(limit: number): Promise<OrmId[]>
  /**
   * How many SQL statements (or driver round trips) the ORM has sent to each server since it was
   * set up, by server name: a counting wrapper around each server's connection (a TypeORM
   * logger, a Prisma query event, ...). Counts only ever grow.
   */
  statementsSent(): Readonly<Record<string, number>>
  /** Closes every handle and the `ShardHomes`. */
  close(): Promise<void>
}

/** What {@link describeRoutedAdapter} hands the adapter's `setup`. */
export interface RoutedSetupContext {
  readonly dialect: Dialect
  /** The application's sharding. */
  readonly sharding: Sharding
  /** The homes of the logical shards: server names a, b and c. */
  readonly map: ShardMap<string>
  /**
   * The directory of those homes, whose states the suite changes as a move would. Give it to
   * `ShardHomes.open`.
   */
  readonly directory: ShardDirectory
  /** A connection URL of each server's database holding the blog tables, by server name. */
  readonly urls: Readonly<Record<string, string>>
  /** The source every server's handle draws IDs from (one source for the application). */
  readonly source: IdSource
}

/** How an adapter is put through {@link describeRoutedAdapter}. */
export interface RoutedSuiteOptions {
  readonly dialect: Dialect
  /**
   * The sources to run the cases with, one after another on the same servers
   * (`routedSources(dialect, packages)` gives every kind).
   * @default [the in-process source over every shard]
   */
  readonly sources?: readonly RoutedSourceCase[]
  /** Builds the ORM: one handle per server, `ShardHomes` over them with `directory`, the adapter. */
  setup(context: RoutedSetupContext): Promise<RoutedBlogThroughOrm>
}
