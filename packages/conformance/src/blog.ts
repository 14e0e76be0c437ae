import type { Dialect } from './databases'

/** An ID as an ORM hands it out: TypeORM uses strings, Prisma and MikroORM `bigint`. */
export type OrmId = string | bigint

/**
 * The blog the suite writes through the ORM under test. The suite creates the tables with
 * {@link blogSchemaSql}; every `id` is a BIGINT primary key the database does not generate:
 * - `authors(id, email)`: **Author**, `{ shardBy: 'email' }` (a string key, hashed).
 * - `posts(id, author_id → authors, title)`: **Post**, `{ sameShardAs: 'author' }` (the relation)
 *   or `{ sameShardAs: 'authorId' }` (the foreign key): the author's shard, read from its ID.
 * - `comments(id, post_id → posts, body)`: **Comment**, `{ sameShardAs: 'post' }` or `'postId'`.
 * - `keyed(id, shard_key)`: **Keyed**, `{ shardBy: 'shardKey' }` on a nullable text column: digit
 *   strings are integers (`key mod logicalShards`), other strings are hashed.
 * - `tagged(id, tenant, lshard)`: **Tagged**, `{ shardBy: 'tenant', shardColumn: 'lshard' }`: the
 *   integer column `lshard` receives the logical shard of the row's ID, for engines that route by
 *   a column value.
 *
 * Every method goes through the ORM's ordinary API (repositories, `create`, `flush`), never around
 * the adapter. Methods that create return the ID the entity (or result) carries after the call,
 * in the ORM's type ({@link idType}).
 */
export interface BlogThroughOrm {
  /** What the ORM uses for BIGINT keys. */
  readonly idType: 'string' | 'bigint'
  /** Inserts one author. */
  createAuthor(email: string): Promise<OrmId>
  /**
   * Inserts one post of `authorId` (an existing author, referenced by ID). `authorId: undefined`
   * saves a post without an author: the adapter must refuse it with `MissingShardKeyError`.
   * An `id` given by the caller must be kept.
   */
  createPost(post: { authorId: OrmId | undefined; title: string; id?: OrmId }): Promise<OrmId>
  /** Inserts many posts in ONE ORM call (save([...]), createMany, one flush). */
  createPosts(posts: readonly { authorId: OrmId; title: string }[]): Promise<OrmId[]>
  /** Inserts a post and its comments in ONE ORM call (cascade, nested create, one flush). */
  createPostWithComments(
    post: { authorId: OrmId; title: string },
    comments: readonly string[],
  ): Promise<{ postId: OrmId; commentIds: OrmId[] }>
  /**
   * Loads post `postId` with its comments through the ORM, pushes a new comment (body `body`)
   * onto the loaded collection and saves the post (cascade / flush). Returns the new comment's ID.
   */
  addCommentToLoadedPost(postId: OrmId, body: string): Promise<OrmId>
  /** Inside a transaction: inserts the post, then throws. Must reject. */
  createPostThenFail(post: { authorId: OrmId; title: string }): Promise<void>
  /**
   * Inserts one `Keyed` row with this shard key (`undefined`: the key is not set; `''` and blanks
   * must be refused like a missing key, with `MissingShardKeyError`). `id`, when given, is the
   * caller's ID, handed to the ORM exactly as it comes, a `number` too (never converted): the
   * adapter keeps it when it is on the shard the key gives, refuses it with `MisplacedIdError`
   * when it is not (unless the call runs inside `trustSuppliedIds`), and refuses a `number` above
   * 2^53 with `UnsafeNumberError`.
   */
  createKeyed(shardKey: string | undefined, id?: OrmId | number): Promise<OrmId>
  /**
   * Writes the `Keyed` row `id` with this shard key through the ORM's upsert, conflicting on the
   * ID: TypeORM `upsert({ id, shardKey }, ['id'])`, Prisma `upsert({ where: { id }, create, update })`,
   * MikroORM `em.upsert(Keyed, { id, shardKey })`. A new row keeps `id`. For a stored row whose
   * ID is on another shard than the new key gives, the adapter must refuse with
   * `ShardKeyChangedError` before anything is written (unless inside `trustSuppliedIds`).
   */
  upsertKeyed(id: OrmId, shardKey: string): Promise<void>
  /**
   * Inserts one `Tagged` row of `tenant`. `lshard`, when given, is the caller's value for the shard
   * column, handed to the ORM as it comes: the adapter keeps it when it is the shard of the row's
   * ID and refuses it with `MisplacedIdError` before anything is written when it is not. Left out,
   * the adapter fills it with the ID's shard.
   */
  createTagged(tenant: string, lshard?: number): Promise<OrmId>
  /** Inserts many `Tagged` rows in ONE ORM call (save([...]), createMany, one flush, bulkCreate). */
  createTaggedMany(tenants: readonly string[]): Promise<OrmId[]>
  /**
   * Sets the shard column of the stored `Tagged` row `id` through the ORM's update path (a loaded
   * entity saved or flushed, `update({ where: { id } })`, an UPDATE by ID). A value other than the
   * shard of `id` must be refused with `ShardKeyChangedError` before anything is written.
   */
  updateTaggedShard(id: OrmId, lshard: number): Promise<void>
  /** Closes the ORM. */
  close(): Promise<void>
}

/** The blog tables for a dialect, dropped first. */
export function blogSchemaSql(dialect: Dialect): string[] {
  const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
  return [
    'DROP TABLE IF EXISTS tagged',
    'DROP TABLE IF EXISTS keyed',
    'DROP TABLE IF EXISTS comments',
    'DROP TABLE IF EXISTS posts',
    'DROP TABLE IF EXISTS authors',
    `CREATE TABLE authors (id BIGINT NOT NULL PRIMARY KEY, email ${text} NOT NULL UNIQUE)`,
    `CREATE TABLE posts (id BIGINT NOT NULL PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES authors (id), title ${text} NOT NULL)`,
    `CREATE TABLE comments (id BIGINT NOT NULL PRIMARY KEY, post_id BIGINT NOT NULL REFERENCES posts (id), body ${text} NOT NULL)`,
    `CREATE TABLE keyed (id BIGINT NOT NULL PRIMARY KEY, shard_key ${text} NULL)`,
    `CREATE TABLE tagged (id BIGINT NOT NULL PRIMARY KEY, tenant ${text} NOT NULL, lshard INTEGER NOT NULL)`,
  ]
}

/** `id` in the ORM's type ({@link BlogThroughOrm.idType}). */
export function ormId(blog: Pick<BlogThroughOrm, 'idType'>, id: bigint): OrmId {
  return blog.idType === 'bigint' ? id : id.toString()
}
