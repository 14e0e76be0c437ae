import {
  checkCount,
  defineLayout,
  defineSharding,
  type IdRequestContext,
  type IdSource,
  instagram,
  type Layout,
  MissingShardKeyError,
  type Sharding,
  throwIfCancelled,
} from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type Dialect, freshDatabase, type RawDatabase } from './databases'
import { expectedShard, findError, ROUTING_KEYS } from './routing'

/** An ID as an ORM hands it out: TypeORM uses strings, Prisma and MikroORM `bigint`. */
export type OrmId = string | bigint

/**
 * The sharding the suites use unless told otherwise: the Instagram layout over 64 logical
 * shards. Sources and adapters under test get this one object.
 */
export function testSharding(logicalShards = 64, layout: Layout = instagram): Sharding {
  return defineSharding({ layout, logicalShards })
}

/**
 * A sharding for leased sources, whose layout has worker bits (41 time, 13 shard, `workerBits`,
 * the rest sequence; epoch 2025-01-01), over 64 logical shards. Two worker bits (four workers)
 * make "every worker held" easy to reach in a test.
 */
export function testLeasedSharding(workerBits = 2): Sharding {
  const layout = defineLayout({
    name: 'leased',
    epoch: '2025-01-01T00:00:00Z',
    timeBits: 41,
    shardBits: 13,
    workerBits,
    sequenceBits: 10 - workerBits,
  })
  return defineSharding({ layout, logicalShards: 64 })
}

/**
 * The blog the suite writes through the ORM under test. The suite creates the tables with
 * {@link blogSchemaSql}; every `id` is a BIGINT primary key the database does not generate:
 * - `authors(id, email)`: **Author**, `{ shardBy: 'email' }` (a string key, hashed).
 * - `posts(id, author_id → authors, title)`: **Post**, `{ sameShardAs: 'author' }` (the relation)
 *   or `{ sameShardAs: 'authorId' }` (the foreign key): the author's shard, read from its ID.
 * - `comments(id, post_id → posts, body)`: **Comment**, `{ sameShardAs: 'post' }` or `'postId'`.
 * - `keyed(id, shard_key)`: **Keyed**, `{ shardBy: 'shardKey' }` on a nullable text column: digit
 *   strings are integers (`key mod logicalShards`), other strings are hashed.
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
  /** Inserts one `Keyed` row with this shard key (`undefined`: the key is not set). */
  createKeyed(shardKey: string | undefined): Promise<OrmId>
  /** Closes the ORM. */
  close(): Promise<void>
}

/** What {@link describeAdapter} hands the adapter's `setup`. */
export interface AdapterSetupContext {
  /**
   * The source to configure the adapter with: the source under test, wrapped to count calls.
   * Its `sharding` is the suite's.
   */
  source: IdSource
  /** The application's sharding, the one the source was made with. */
  sharding: Sharding
  /** A fresh database with the blog tables; `raw.url` is the connection URL for the ORM. */
  raw: RawDatabase
}

/** How an adapter is put through {@link describeAdapter}. */
export interface AdapterSuiteOptions {
  dialect: Dialect
  /** Base name of the database the suite creates (unique per test file; the run tag is appended). */
  database: string
  /** The sharding of the run. @default testSharding() (Instagram layout, 64 logical shards) */
  sharding?: Sharding
  /** The source under test (in-process, PostgreSQL, MySQL, ...), made with `sharding`. */
  createSource: (raw: RawDatabase, sharding: Sharding) => IdSource | Promise<IdSource>
  /** Builds the ORM with the adapter around the given source. */
  setup: (context: AdapterSetupContext) => Promise<BlogThroughOrm>
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
 *   createSource: (_raw, sharding) => new InProcessSource({ sharding, shards: 'all' }),
 *   setup: async ({ source, raw }) => blogOnTypeorm(raw, source),
 * })
 * ```
 */
export function describeAdapter(name: string, options: AdapterSuiteOptions): void {
  const sharding = options.sharding ?? testSharding()
  const { layout, logicalShards } = sharding
  const concurrency = options.concurrency ?? 16
  const p = (index: number) => param(options.dialect, index)

  describe(`adapter conformance: ${name}`, () => {
    let raw: RawDatabase
    let inner: IdSource
    let counting: CountingSource
    let blog: BlogThroughOrm
    let authors: bigint[] = []

    const rows = (sql: string, params: readonly unknown[] = []) => raw.query(sql, params)
    const count = async (sql: string, params: readonly unknown[] = []) =>
      Number(Object.values((await rows(sql, params))[0] ?? {})[0])
    const shardOf = (id: unknown) => sharding.shardOfId(String(id))

    beforeAll(async () => {
      raw = await freshDatabase(options.dialect, options.database)
      for (const statement of blogSchemaSql(options.dialect)) await raw.query(statement)
      inner = await options.createSource(raw, sharding)
      if (!inner.sharding) {
        throw new Error(
          'The adapter suite needs a source whose IDs carry a layout (describePlainIdAdapter is for ticket servers).',
        )
      }
      sharding.checkSame(inner.sharding, 'the source under test')
      counting = new CountingSource(inner)
      blog = await options.setup({ source: counting, sharding, raw })
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
      await inner?.close()
      await raw?.close()
    })

    beforeEach(() => counting?.reset())

    it('gives an author an ID before the INSERT, on the shard of the hash of its email, in the ORM type', async () => {
      const id = await blog.createAuthor('edsger@example.com')
      expect(typeof id).toBe(blog.idType)
      const [row] = await rows(`SELECT id FROM authors WHERE email = ${p(1)}`, [
        'edsger@example.com',
      ])
      expect(String(row?.id)).toBe(String(id))
      expect(shardOf(row?.id)).toBe(expectedShard('edsger@example.com', logicalShards))
    })

    it('routes every kind of shard key to the shard computed independently (integers, digit strings, other strings, huge integers)', async () => {
      const written = new Map<string, string>()
      for (const key of ROUTING_KEYS) written.set(key, String(await blog.createKeyed(key)))
      const stored = await rows('SELECT id, shard_key FROM keyed WHERE shard_key IS NOT NULL')
      expect(stored).toHaveLength(ROUTING_KEYS.length)
      for (const row of stored) {
        const key = String(row.shard_key)
        expect(written.get(key), `the ID returned for key ${JSON.stringify(key)}`).toBe(
          String(row.id),
        )
        expect(shardOf(row.id), `the shard of key ${JSON.stringify(key)}`).toBe(
          expectedShard(key, logicalShards),
        )
      }
    })

    it("gives a post an ID on its author's shard, read from the author's ID", async () => {
      const author = authors[0]!
      const id = await blog.createPost({ authorId: ormId(blog, author), title: 'single' })
      expect(typeof id).toBe(blog.idType)
      const stored = await rows(`SELECT id, author_id FROM posts WHERE title = ${p(1)}`, ['single'])
      expect(stored).toHaveLength(1)
      expect(String(stored[0]?.id)).toBe(String(id))
      expect(String(stored[0]?.author_id)).toBe(author.toString())
      expect(shardOf(stored[0]?.id)).toBe(shardOf(stored[0]?.author_id))
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
        expect(shardOf(row.id)).toBe(shardOf(row.author_id))
      }
      const shards = new Set(authors.map((author) => shardOf(author))).size
      if (!inner.synchronous) {
        expect(counting.nextIdCalls).toBe(0)
        expect(counting.nextIdsCalls).toBeLessThanOrEqual(shards)
      }
      expect(counting.idsIssued).toBeGreaterThanOrEqual(60)
    })

    it('co-locates cascaded children with their parent: comment, post and author IDs decode to one shard', async () => {
      const author = authors[1]!
      const { postId, commentIds } = await blog.createPostWithComments(
        { authorId: ormId(blog, author), title: 'with comments' },
        ['first', 'second', 'third'],
      )
      const stored = await rows(
        `SELECT c.id, c.post_id, p.author_id FROM comments c JOIN posts p ON p.id = c.post_id WHERE p.title = ${p(1)}`,
        ['with comments'],
      )
      expect(stored).toHaveLength(3)
      expect(new Set(stored.map((row) => String(row.id)))).toEqual(new Set(commentIds.map(String)))
      for (const row of stored) {
        expect(String(row.post_id)).toBe(String(postId))
        expect(String(row.author_id)).toBe(author.toString())
        expect(shardOf(row.id)).toBe(shardOf(row.post_id))
        expect(shardOf(row.post_id)).toBe(shardOf(row.author_id))
      }
    })

    it("puts a comment pushed onto a loaded post's collection on the post's shard", async () => {
      const author = authors[2]!
      const { postId, commentIds } = await blog.createPostWithComments(
        { authorId: ormId(blog, author), title: 'loaded later' },
        ['early'],
      )
      const commentId = await blog.addCommentToLoadedPost(postId, 'late')
      expect(typeof commentId).toBe(blog.idType)
      const stored = await rows(`SELECT id, post_id, body FROM comments WHERE post_id = ${p(1)}`, [
        String(postId),
      ])
      expect(stored.map((row) => String(row.body)).sort()).toEqual(['early', 'late'])
      const late = stored.find((row) => row.body === 'late')!
      expect(String(late.id)).toBe(String(commentId))
      expect(String(stored.find((row) => row.body === 'early')?.id)).toBe(String(commentIds[0]))
      expect(shardOf(late.id)).toBe(shardOf(postId))
      expect(shardOf(late.id)).toBe(shardOf(author))
    })

    it('keeps an ID the caller set', async () => {
      const author = authors[2]!
      const yesterday = Date.now() - 86_400_000 // no source hands out IDs of yesterday
      const chosen = layout.compose({ timestamp: yesterday, shard: shardOf(author), sequence: 7 })
      const id = await blog.createPost({
        authorId: ormId(blog, author),
        title: 'chosen',
        id: ormId(blog, chosen),
      })
      expect(String(id)).toBe(chosen.toString())
      expect(
        await count(`SELECT COUNT(*) FROM posts WHERE id = ${p(1)}`, [chosen.toString()]),
      ).toBe(1)
    })

    it('writes nothing when the transaction rolls back', async () => {
      await expect(
        blog.createPostThenFail({ authorId: ormId(blog, authors[3]!), title: 'rolled back' }),
      ).rejects.toThrow()
      expect(await count(`SELECT COUNT(*) FROM posts WHERE title = ${p(1)}`, ['rolled back'])).toBe(
        0,
      )
    })

    it('refuses a row without its shard key or parent with MissingShardKeyError, before anything is written', async () => {
      const posts = await count('SELECT COUNT(*) FROM posts')
      const keyed = await count('SELECT COUNT(*) FROM keyed')
      const noParent = await settle(blog.createPost({ authorId: undefined, title: 'no author' }))
      expect(findError(noParent, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
      const noKey = await settle(blog.createKeyed(undefined))
      expect(findError(noKey, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
      expect(await count('SELECT COUNT(*) FROM posts')).toBe(posts)
      expect(await count('SELECT COUNT(*) FROM keyed')).toBe(keyed)
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
        expect(shardOf(row.id)).toBe(expectedShard(String(row.email), logicalShards))
      }
      for (const row of await rows('SELECT id, author_id FROM posts')) {
        expect(shardOf(row.id)).toBe(shardOf(row.author_id))
      }
      for (const row of await rows('SELECT id, post_id FROM comments')) {
        expect(shardOf(row.id)).toBe(shardOf(row.post_id))
      }
      for (const row of await rows('SELECT id, shard_key FROM keyed')) {
        expect(shardOf(row.id)).toBe(expectedShard(String(row.shard_key), logicalShards))
      }
      expect(await count('SELECT COUNT(*) FROM comments')).toBeGreaterThan(0)
    })
  })
}

/** The blog tables for a dialect, dropped first. */
export function blogSchemaSql(dialect: Dialect): string[] {
  const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
  return [
    'DROP TABLE IF EXISTS keyed',
    'DROP TABLE IF EXISTS comments',
    'DROP TABLE IF EXISTS posts',
    'DROP TABLE IF EXISTS authors',
    `CREATE TABLE authors (id BIGINT NOT NULL PRIMARY KEY, email ${text} NOT NULL UNIQUE)`,
    `CREATE TABLE posts (id BIGINT NOT NULL PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES authors (id), title ${text} NOT NULL)`,
    `CREATE TABLE comments (id BIGINT NOT NULL PRIMARY KEY, post_id BIGINT NOT NULL REFERENCES posts (id), body ${text} NOT NULL)`,
    `CREATE TABLE keyed (id BIGINT NOT NULL PRIMARY KEY, shard_key ${text} NULL)`,
  ]
}

/** Wraps a source, counting calls and IDs; `sharding` and `close()` are the inner source's. */
export class CountingSource implements IdSource {
  nextIdCalls = 0
  nextIdsCalls = 0
  idsIssued = 0

  constructor(private readonly inner: IdSource) {}

  get sharding() {
    return this.inner.sharding
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

  close() {
    return this.inner.close()
  }

  reset(): void {
    this.nextIdCalls = 0
    this.nextIdsCalls = 0
    this.idsIssued = 0
  }
}

/**
 * A synchronous source behind promises, standing in for a database source without a server: it
 * checks the count first and honours an aborted `context.signal` like one; `close()` closes the
 * inner source.
 */
export function asAsync(inner: IdSource): IdSource {
  return {
    sharding: inner.sharding,
    synchronous: false,
    async nextId(shard, context) {
      throwIfCancelled(context?.signal, 'the source')
      return await inner.nextId(shard, context)
    },
    async nextIds(shard, count, context) {
      checkCount(count)
      throwIfCancelled(context?.signal, 'the source')
      return await inner.nextIds(shard, count, context)
    },
    close: () => inner.close(),
  }
}

function ormId(blog: BlogThroughOrm, id: bigint): OrmId {
  return blog.idType === 'bigint' ? id : id.toString()
}

function param(dialect: Dialect, index: number): string {
  return dialect === 'postgres' ? `$${index}` : '?'
}

async function settle(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (caught: unknown) => caught,
  )
}
