import {
  hashShard,
  type IdRequestContext,
  type IdSource,
  integerShard,
  type Layout,
  MissingShardKeyError,
  ShardflakeError,
} from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type Dialect, freshDatabase, type RawDatabase } from './databases'

/** An ID as an ORM hands it out: TypeORM uses strings, Prisma and MikroORM `bigint`. */
export type OrmId = string | bigint

/**
 * The blog the suite writes through the ORM under test. Tables (created by the suite with
 * {@link blogSchemaSql}): `authors(id, email)`, `posts(id, author_id → authors, title)`,
 * `comments(id, post_id → posts, body)`, every `id` a BIGINT primary key the database does not
 * generate. The rules the adapter must configure:
 * - `Author`: `shardBy: 'email'` (a string key: hashed with `hashShard`)
 * - `Post`: `shardBy` its author id (integer key: `authorId % logicalShards`), or, with
 *   `postsFollowAuthor`, the author's own shard (`sameShardAs` / a relation)
 * - `Comment`: `sameShardAs` its post (`layout.shardOf(postId)`)
 */
export interface BlogThroughOrm {
  /** What the ORM uses for BIGINT keys. */
  readonly idType: 'string' | 'bigint'
  /** Inserts one author; returns the ID the entity/result carries after the call. */
  createAuthor(email: string): Promise<OrmId>
  /** Inserts one post; an `id` given by the caller must be kept. */
  createPost(post: { authorId: OrmId | undefined; title: string; id?: OrmId }): Promise<OrmId>
  /** Inserts many posts in ONE ORM call (save([...]), createMany, one flush). */
  createPosts(posts: readonly { authorId: OrmId; title: string }[]): Promise<OrmId[]>
  /** Inserts a post and its comments in ONE ORM call (cascade, nested create, one flush). */
  createPostWithComments(
    post: { authorId: OrmId; title: string },
    comments: readonly string[],
  ): Promise<{ postId: OrmId; commentIds: OrmId[] }>
  /** Inside a transaction: inserts the post, then throws. Must reject. */
  createPostThenFail(post: { authorId: OrmId; title: string }): Promise<void>
  /** Closes the ORM. */
  close(): Promise<void>
}

/** What {@link describeAdapter} hands the adapter's `setup`. */
export interface AdapterSetupContext {
  /**
   * The source to configure the adapter with. It wraps the source under test, counts calls, and
   * declares `logicalShards`, which the adapter must use to reduce integer keys.
   */
  source: IdSource
  layout: Layout
  logicalShards: number
  /** A fresh database with the blog tables; `raw.url` is the connection URL for the ORM. */
  raw: RawDatabase
}

/** How an adapter is put through {@link describeAdapter}. */
export interface AdapterSuiteOptions {
  dialect: Dialect
  /** Name of the database the suite creates (unique per test file). */
  database: string
  /** The source under test (in-process, PostgreSQL, MySQL, ...). */
  createSource: (raw: RawDatabase) => IdSource | Promise<IdSource>
  /** Builds the ORM with the adapter around the given source. */
  setup: (context: AdapterSetupContext) => Promise<BlogThroughOrm>
  /** Reduces integer keys. @default 64 */
  logicalShards?: number
  /** Posts take their author's shard (co-location through a relation) instead of `authorId % n`. */
  postsFollowAuthor?: boolean
  /** Concurrent loops in the concurrency test. @default 16 */
  concurrency?: number
}

/**
 * The contract of every ORM adapter, as tests, verified through raw SQL. One call per adapter x
 * source x database:
 *
 * ```ts
 * describeAdapter('TypeORM / PostgreSQL / in-process', {
 *   dialect: 'postgres',
 *   database: 'sf_typeorm_pg_inproc',
 *   createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
 *   setup: async ({ source, raw }) => blogOnTypeorm(raw.url, source),
 * })
 * ```
 */
export function describeAdapter(name: string, options: AdapterSuiteOptions): void {
  const logicalShards = options.logicalShards ?? 64
  const concurrency = options.concurrency ?? 16

  describe(`adapter conformance: ${name}`, () => {
    let raw: RawDatabase
    let inner: IdSource
    let counting: CountingSource
    let layout: Layout
    let blog: BlogThroughOrm
    let authors: bigint[] = []

    const postShard = (authorId: bigint) =>
      options.postsFollowAuthor ? layout.shardOf(authorId) : integerShard(authorId, logicalShards)
    const rows = (sql: string, params: readonly unknown[] = []) => raw.query(sql, params)
    const count = async (sql: string, params: readonly unknown[] = []) =>
      Number(Object.values((await rows(sql, params))[0] ?? {})[0])

    beforeAll(async () => {
      raw = await freshDatabase(options.dialect, options.database)
      for (const statement of blogSchemaSql(options.dialect)) await raw.query(statement)
      inner = await options.createSource(raw)
      if (!inner.layout)
        throw new Error('The adapter suite needs a source whose IDs carry a layout.')
      layout = inner.layout
      counting = new CountingSource(inner, logicalShards)
      blog = await options.setup({ source: counting, layout, logicalShards, raw })
      authors = []
      for (const email of [
        'ada@example.com',
        'grace@example.com',
        'linus@example.com',
        'margaret@example.com',
      ]) {
        authors.push(BigInt(await blog.createAuthor(email)))
      }
    })

    afterAll(async () => {
      await blog?.close()
      await inner?.close?.()
      await raw?.close()
    })

    beforeEach(() => counting.reset())

    it('gives an author an ID before the INSERT, from the hash of its email, in the ORM type', async () => {
      const id = await blog.createAuthor('edsger@example.com')
      expect(typeof id).toBe(blog.idType)
      const [row] = await rows(
        `SELECT id FROM authors WHERE email = ${param(options.dialect, 1)}`,
        ['edsger@example.com'],
      )
      expect(String(row?.id)).toBe(String(id))
      expect(layout.shardOf(String(row?.id))).toBe(hashShard('edsger@example.com', logicalShards))
      expect(Math.abs(layout.timeOf(String(row?.id)).getTime() - Date.now())).toBeLessThan(120_000)
    })

    it("gives a post an ID on its author's shard", async () => {
      const author = authors[0]!
      const id = await blog.createPost({ authorId: ormId(blog, author), title: 'single' })
      expect(typeof id).toBe(blog.idType)
      const stored = await rows(
        `SELECT id, author_id FROM posts WHERE title = ${param(options.dialect, 1)}`,
        ['single'],
      )
      expect(stored).toHaveLength(1)
      expect(String(stored[0]?.id)).toBe(String(id))
      expect(layout.shardOf(String(id))).toBe(postShard(author))
    })

    it('inserts many rows with distinct IDs, asking the source once per shard', async () => {
      const posts = Array.from({ length: 60 }, (_, i) => ({
        authorId: ormId(blog, authors[i % authors.length]!),
        title: `batch ${i}`,
      }))
      const ids = await blog.createPosts(posts)
      expect(ids).toHaveLength(60)
      expect(new Set(ids.map(String)).size).toBe(60)
      const stored = await rows(`SELECT id, author_id, title FROM posts WHERE title LIKE 'batch %'`)
      expect(stored).toHaveLength(60)
      for (const row of stored) {
        const index = Number(String(row.title).slice('batch '.length))
        expect(String(row.id)).toBe(String(ids[index]))
        expect(layout.shardOf(String(row.id))).toBe(postShard(BigInt(String(row.author_id))))
      }
      const shards = new Set(authors.map(postShard)).size
      if (!inner.synchronous) {
        expect(counting.nextIdCalls).toBe(0)
        expect(counting.nextIdsCalls).toBeLessThanOrEqual(shards)
      }
      expect(counting.idsIssued).toBeGreaterThanOrEqual(60)
    })

    it('co-locates cascaded children with their parent, with foreign keys to the sharded key', async () => {
      const author = authors[1]!
      const { postId, commentIds } = await blog.createPostWithComments(
        { authorId: ormId(blog, author), title: 'with comments' },
        ['first', 'second', 'third'],
      )
      const stored = await rows(
        `SELECT c.id, c.post_id FROM comments c JOIN posts p ON p.id = c.post_id WHERE p.title = ${param(options.dialect, 1)}`,
        ['with comments'],
      )
      expect(stored).toHaveLength(3)
      expect(new Set(stored.map((row) => String(row.id)))).toEqual(new Set(commentIds.map(String)))
      for (const row of stored) {
        expect(String(row.post_id)).toBe(String(postId))
        expect(layout.shardOf(String(row.id))).toBe(layout.shardOf(String(postId)))
      }
      expect(layout.shardOf(String(postId))).toBe(postShard(author))
    })

    it('keeps an ID the caller set', async () => {
      const author = authors[2]!
      const yesterday = Date.now() - 86_400_000 // no source hands out IDs of yesterday
      const chosen = layout.compose({ timestamp: yesterday, shard: postShard(author), sequence: 7 })
      const id = await blog.createPost({
        authorId: ormId(blog, author),
        title: 'chosen',
        id: ormId(blog, chosen),
      })
      expect(String(id)).toBe(chosen.toString())
      expect(
        await count(`SELECT COUNT(*) FROM posts WHERE id = ${param(options.dialect, 1)}`, [
          chosen.toString(),
        ]),
      ).toBe(1)
    })

    it('writes nothing when the transaction rolls back', async () => {
      await expect(
        blog.createPostThenFail({ authorId: ormId(blog, authors[3]!), title: 'rolled back' }),
      ).rejects.toThrow()
      expect(
        await count(`SELECT COUNT(*) FROM posts WHERE title = ${param(options.dialect, 1)}`, [
          'rolled back',
        ]),
      ).toBe(0)
    })

    it('refuses a row without its shard key with MissingShardKeyError, before anything is written', async () => {
      const before = await count('SELECT COUNT(*) FROM posts')
      const error = await blog.createPost({ authorId: undefined, title: 'no author' }).then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(findCause(error, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
      expect(await count('SELECT COUNT(*) FROM posts')).toBe(before)
      expect(counting.idsIssued).toBe(0)
    })

    it(`never repeats an ID across ${concurrency} concurrent insert loops`, async () => {
      const perLoop = 25
      await Promise.all(
        Array.from({ length: concurrency }, async (_, loop) => {
          for (let i = 0; i < perLoop; i++) {
            if (i % 5 === 4) {
              await blog.createPosts(
                [0, 1, 2].map((k) => ({
                  authorId: ormId(blog, authors[(loop + k) % authors.length]!),
                  title: `loop ${loop}`,
                })),
              )
            } else {
              await blog.createPost({
                authorId: ormId(blog, authors[loop % authors.length]!),
                title: `loop ${loop}`,
              })
            }
          }
        }),
      )
      const expected = concurrency * (perLoop - perLoop / 5 + (perLoop / 5) * 3)
      const [stats] = await rows(
        `SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM posts WHERE title LIKE 'loop %'`,
      )
      expect(Number(stats?.n)).toBe(expected)
      expect(Number(stats?.d)).toBe(expected)
    })

    it('stores every row on the shard its rule gives', async () => {
      for (const row of await rows('SELECT id, email FROM authors')) {
        expect(layout.shardOf(String(row.id))).toBe(hashShard(String(row.email), logicalShards))
      }
      for (const row of await rows('SELECT id, author_id FROM posts')) {
        expect(layout.shardOf(String(row.id))).toBe(postShard(BigInt(String(row.author_id))))
      }
      for (const row of await rows('SELECT c.id, c.post_id FROM comments c')) {
        expect(layout.shardOf(String(row.id))).toBe(layout.shardOf(String(row.post_id)))
      }
      const [all] = await rows(
        'SELECT (SELECT COUNT(*) FROM authors) + (SELECT COUNT(*) FROM posts) + (SELECT COUNT(*) FROM comments) AS n',
      )
      expect(Number(all?.n)).toBeGreaterThan(0)
    })
  })
}

/** The blog tables for a dialect, dropped first. */
export function blogSchemaSql(dialect: Dialect): string[] {
  const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
  return [
    'DROP TABLE IF EXISTS comments',
    'DROP TABLE IF EXISTS posts',
    'DROP TABLE IF EXISTS authors',
    `CREATE TABLE authors (id BIGINT NOT NULL PRIMARY KEY, email ${text} NOT NULL UNIQUE)`,
    `CREATE TABLE posts (id BIGINT NOT NULL PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES authors (id), title ${text} NOT NULL)`,
    `CREATE TABLE comments (id BIGINT NOT NULL PRIMARY KEY, post_id BIGINT NOT NULL REFERENCES posts (id), body ${text} NOT NULL)`,
  ]
}

/** Wraps a source, counting calls and IDs, and declares the logical shards in use. */
export class CountingSource implements IdSource {
  nextIdCalls = 0
  nextIdsCalls = 0
  idsIssued = 0

  constructor(
    private readonly inner: IdSource,
    readonly logicalShards: number,
  ) {}

  get layout() {
    return this.inner.layout
  }

  get synchronous() {
    return this.inner.synchronous
  }

  nextId(shard: number, context?: IdRequestContext) {
    this.nextIdCalls++
    this.idsIssued++
    return this.inner.nextId(shard, context)
  }

  nextIds(shard: number, count: number, context?: IdRequestContext) {
    this.nextIdsCalls++
    this.idsIssued += count
    return this.inner.nextIds(shard, count, context)
  }

  reset(): void {
    this.nextIdCalls = 0
    this.nextIdsCalls = 0
    this.idsIssued = 0
  }
}

function ormId(blog: BlogThroughOrm, id: bigint): OrmId {
  return blog.idType === 'bigint' ? id : id.toString()
}

function param(dialect: Dialect, index: number): string {
  return dialect === 'postgres' ? `$${index}` : '?'
}

/** The error itself or one in its `cause` chain that is an instance of `type`. */
function findCause<T>(error: unknown, type: new (...args: never[]) => T): T | unknown {
  let current: unknown = error
  for (let depth = 0; depth < 5 && current; depth++) {
    if (current instanceof type) return current
    if (current instanceof ShardflakeError) return current
    current = (current as { cause?: unknown }).cause
  }
  return error
}
