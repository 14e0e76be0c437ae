/**
 * What the example does through each ORM, in that ORM's own calls (see `typeorm.ts`,
 * `prisma.ts`, `mikro-orm.ts`). IDs are decimal strings here, whatever the ORM uses.
 */
import type { InProcessSource, ShardDirectory, ShardMap } from '@shardflake/core'
import type { ExampleDialect } from './servers.ts'

/** The ORMs the example runs, by the name its command line uses. */
export const ORMS = ['typeorm', 'prisma', 'mikro-orm'] as const
export type OrmName = (typeof ORMS)[number]

export interface NewPost {
  readonly userId: string
  readonly title: string
}

export interface NewComment {
  readonly postId: string
  readonly body: string
}

/** Users, posts and comments on three servers, written and read through one ORM. */
export interface RoutedBlog {
  readonly orm: OrmName
  /** Users, each on the server of its email's shard: one call. */
  createUsers(emails: readonly string[]): Promise<string[]>
  /** Posts, each on its user's server: one call. */
  createPosts(posts: readonly NewPost[]): Promise<string[]>
  /** Comments, each on its post's server: one call. */
  createComments(comments: readonly NewComment[]): Promise<string[]>
  /** A post by ID, with its comments' bodies (a read by ID: one server). */
  findPost(id: string): Promise<{ title: string; comments: string[] } | undefined>
  /** A user's ID by email (a read by shard key: one server). */
  findUserByEmail(email: string): Promise<string | undefined>
  /** The newest `limit` posts of every server, merged in ID order (an explicit fan-out). */
  newestPosts(limit: number): Promise<string[]>
  /**
   * The same `createPosts` written straight through server `server`'s own handle (its
   * DataSource, client or ORM), without the router: the benchmark's baseline. Every post must
   * live on that server.
   */
  createPostsDirect(server: string, posts: readonly NewPost[]): Promise<string[]>
  close(): Promise<void>
}

/** What opening a {@link RoutedBlog} takes. */
export interface BlogOptions {
  readonly dialect: ExampleDialect
  /** Each server's URL of the database to use, by name (a, b, c). */
  readonly urls: Readonly<Record<string, string>>
  /** The application's one ID source. */
  readonly source: InProcessSource
  /**
   * Where the homes are read from: a shard map, or a directory (which a move of shards changes).
   * @default the example's `shardMap` (0-20 on a, 21-41 on b, 42-63 on c)
   */
  readonly directory?: ShardMap<string> | ShardDirectory
}
