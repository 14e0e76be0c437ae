import type { IdSource } from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type BlogThroughOrm, blogSchemaSql, type OrmId, ormId as ormIdOf } from './blog'
import { type Dialect, freshDatabase, type RawDatabase } from './databases'
import { CountingSource } from './source-wrappers'

/** The part of {@link BlogThroughOrm} the plain-ID suite drives (a whole one will do). */
export type PlainBlogThroughOrm = Omit<
  BlogThroughOrm,
  'createKeyed' | 'upsertKeyed' | 'addCommentToLoadedPost'
>

/** How an adapter is put through {@link describePlainIdAdapter}. */
export interface PlainIdSuiteOptions {
  dialect: Dialect
  /** Base name of the database the suite creates (unique per test file; the run tag is appended). */
  database: string
  /** A source of plain IDs, without a sharding (ticket servers). */
  createSource: (raw: RawDatabase) => IdSource | Promise<IdSource>
  /** Builds the ORM with the adapter around the given source, on the blog of the adapter suite. */
  setup: (context: { source: IdSource; raw: RawDatabase }) => Promise<PlainBlogThroughOrm>
  /** Concurrent loops in the concurrency test. @default 16 */
  concurrency?: number
}

/**
 * The contract of an ORM adapter with a source of plain IDs (Flickr-style ticket servers: no
 * time, no shard in them), verified through raw SQL on the blog of {@link describeAdapter}. Shard
 * rules do not apply to such IDs: the adapter asks the source without a shard and stores what it
 * gets. Every insert path gets the source's IDs before the INSERT, children's foreign keys carry
 * their parent's, an ID the caller gives is kept, a rollback writes nothing, and concurrent
 * callers never share an ID.
 *
 * @example
 * ```ts
 * describePlainIdAdapter('TypeORM / MariaDB / TicketServerSource', {
 *   dialect: 'mysql',
 *   database: 'sf_typeorm_tickets',
 *   createSource: (raw) => ticketSource(raw),
 *   setup: async ({ source, raw }) => blogOnTypeorm(raw, source),
 * })
 * ```
 */
export function describePlainIdAdapter(name: string, options: PlainIdSuiteOptions): void {
  const concurrency = options.concurrency ?? 16

  describe(`adapter conformance, plain IDs: ${name}`, () => {
    let raw: RawDatabase
    let inner: IdSource
    let counting: CountingSource
    let blog: PlainBlogThroughOrm
    let author: bigint
    const rows = (sql: string) => raw.query(sql)
    const ormId = (id: bigint): OrmId => ormIdOf(blog, id)
    /** Every key of the blog's tables, read back raw. */
    const storedIds = async () =>
      (
        await rows(
          'SELECT id FROM authors UNION ALL SELECT id FROM posts UNION ALL SELECT id FROM comments',
        )
      ).map((row) => BigInt(String(row.id)))

    beforeAll(async () => {
      raw = await freshDatabase(options.dialect, options.database)
      for (const statement of blogSchemaSql(options.dialect)) await raw.query(statement)
      inner = await options.createSource(raw)
      if (inner.sharding) {
        throw new Error('This suite is for sources of plain IDs (sharding: undefined).')
      }
      counting = new CountingSource(inner)
      blog = await options.setup({ source: counting, raw })
      author = BigInt(await blog.createAuthor('plain@example.com'))
    })

    afterAll(async () => {
      await blog?.close()
      await inner?.close()
      await raw?.close()
    })

    it('gives single rows, batches and cascaded children IDs from the source, in the ORM type', async () => {
      counting.reset()
      const single = await blog.createPost({ authorId: ormId(author), title: 'plain single' })
      const batch = await blog.createPosts(
        Array.from({ length: 20 }, (_, i) => ({ authorId: ormId(author), title: `plain ${i}` })),
      )
      const { postId, commentIds } = await blog.createPostWithComments(
        { authorId: ormId(author), title: 'plain parent' },
        ['one', 'two', 'three'],
      )
      const assigned = [single, ...batch, postId, ...commentIds]
      for (const id of assigned) expect(typeof id).toBe(blog.idType)
      expect(new Set(assigned.map(String)).size).toBe(assigned.length)
      expect(counting.idsIssued).toBeGreaterThanOrEqual(assigned.length)
      const stored = new Set((await storedIds()).map(String))
      for (const id of assigned) expect(stored.has(String(id))).toBe(true)
      const children = await rows(
        `SELECT c.id, c.post_id FROM comments c JOIN posts p ON p.id = c.post_id WHERE p.title = 'plain parent'`,
      )
      expect(children.map((row) => String(row.id)).sort()).toEqual(commentIds.map(String).sort())
      for (const row of children) expect(String(row.post_id)).toBe(String(postId))
    })

    it('keeps an ID the caller set, and writes nothing when the transaction rolls back', async () => {
      const chosen = 9_000_000_000_000_000_001n // beyond anything the source hands out here
      const id = await blog.createPost({
        authorId: ormId(author),
        title: 'plain chosen',
        id: ormId(chosen),
      })
      expect(String(id)).toBe(chosen.toString())
      expect(await rows(`SELECT id FROM posts WHERE id = ${chosen}`)).toHaveLength(1)
      await expect(
        blog.createPostThenFail({ authorId: ormId(author), title: 'plain rolled back' }),
      ).rejects.toThrow()
      expect(await rows(`SELECT id FROM posts WHERE title = 'plain rolled back'`)).toHaveLength(0)
    })

    it(`never repeats an ID across ${concurrency} concurrent insert loops`, async () => {
      const before = (await storedIds()).length
      await Promise.all(
        Array.from({ length: concurrency }, async (_, loop) => {
          for (let i = 0; i < 10; i++) {
            if (i % 3 === 2) {
              await blog.createPosts(
                [0, 1, 2].map((k) => ({
                  authorId: ormId(author),
                  title: `plain loop ${loop}.${k}`,
                })),
              )
            } else {
              await blog.createPost({ authorId: ormId(author), title: `plain loop ${loop}` })
            }
          }
        }),
      )
      const ids = await storedIds()
      expect(ids.length - before).toBe(concurrency * (7 + 3 * 3))
      expect(new Set(ids).size).toBe(ids.length)
    })
  })
}
