/**
 * A bulk save() with a synchronous source gets IDs ascending in row order per table, so the
 * multi-row INSERT appends to the primary key's B-tree; checked through a raw reader on MariaDB
 * (InnoDB clusters rows by primary key), and against per-shard order on the same rows.
 */
import {
  blogSchemaSql,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { DataSource } from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedIds } from '../src'
import { Author, Comment, dataSourceOptions, Post } from './blog'

const sharding = testSharding()

describe('bulk save() on MariaDB', () => {
  let raw: RawDatabase
  let dataSource: DataSource
  let source: InProcessSource
  /**
   * How far the source's clock is ahead. A batch ascends within the unused time behind the
   * source's clock: back-to-back batches of hundreds of rows use it up (and fall back to per-shard
   * order), so the clock moves 1 s before each batch, as between the batches of an application.
   */
  let skew = 0
  const room = () => {
    skew += 1000
  }

  beforeAll(async () => {
    raw = await freshDatabase('mysql', 'h24_ascending_typeorm_my')
    for (const statement of blogSchemaSql('mysql')) await raw.query(statement)
    // The order the server received the rows in (the entities do not map it).
    for (const table of ['authors', 'posts', 'comments']) {
      await raw.query(`ALTER TABLE ${table} ADD seq BIGINT NOT NULL AUTO_INCREMENT, ADD KEY (seq)`)
    }
    source = new InProcessSource({ sharding, shards: 'all', clock: () => Date.now() + skew })
    source.nextId(0) // the source's first clock reading: no batch takes time before it
    dataSource = new DataSource(dataSourceOptions(raw, [Author, Post, Comment]))
    shardedIds(dataSource, { source })
    await dataSource.initialize()
  })
  afterAll(async () => {
    await dataSource?.destroy()
    source?.close()
    await raw?.close()
  })

  it('gives 300 authors of many shards IDs ascending in row order, each on its shard', async () => {
    const emails = Array.from(
      { length: 300 },
      (_, i) => `ascending-${(i * 7919) % 300}@example.com`,
    )
    const shards = emails.map((email) => sharding.shardForKey(email))
    expect(shards.filter((shard, i) => i > 0 && shard < shards[i - 1]!).length).toBeGreaterThan(100)
    const authors = emails.map((email) => Object.assign(new Author(), { email }))
    room()
    await dataSource.getRepository(Author).save(authors)
    const ids = authors.map((author) => BigInt(author.id))
    for (let i = 1; i < ids.length; i++) {
      expect(ids[i]! > ids[i - 1]!, `row ${i}`).toBe(true)
    }
    const stored = await raw.query(
      `SELECT CAST(id AS CHAR) AS id, email FROM authors WHERE email LIKE 'ascending-%'`,
    )
    expect(stored).toHaveLength(300)
    for (const row of stored) {
      expect(sharding.shardOfId(String(row.id))).toBe(sharding.shardForKey(String(row.email)))
    }
  })

  it('orders each table on its own: authors and their posts in one save()', async () => {
    const authors = Array.from({ length: 40 }, (_, i) =>
      Object.assign(new Author(), { email: `pair-${(i * 13) % 40}@example.com` }),
    )
    room()
    await dataSource.getRepository(Author).save(authors)
    const posts = authors.map((author, i) =>
      Object.assign(new Post(), { author, title: `pair post ${i}` }),
    )
    room()
    await dataSource.getRepository(Post).save(posts)
    const postIds = posts.map((post) => BigInt(post.id!))
    for (let i = 1; i < postIds.length; i++) expect(postIds[i]! > postIds[i - 1]!).toBe(true)
    posts.forEach((post, i) => {
      expect(sharding.shardOfId(post.id!)).toBe(sharding.shardOfId(authors[i]!.id))
    })
  })

  /** `count` emails whose shards go down between neighbours about half the time. */
  function shuffled(prefix: string, count: number): string[] {
    const emails = Array.from(
      { length: count },
      (_, i) => `${prefix}-${(i * 7919) % count}@example.com`,
    )
    const shards = emails.map((email) => sharding.shardForKey(email))
    expect(shards.filter((shard, i) => i > 0 && shard < shards[i - 1]!).length).toBeGreaterThan(
      count / 4,
    )
    return emails
  }

  /** The IDs of `table`'s rows whose `column` starts with `prefix`, in the order the server got them. */
  async function received(table: string, column: string, prefix: string): Promise<bigint[]> {
    const rows = await raw.query(
      `SELECT CAST(id AS CHAR) AS id FROM ${table} WHERE ${column} LIKE '${prefix}%' ORDER BY seq`,
    )
    return rows.map((row) => BigInt(String(row.id)))
  }

  function expectAscending(ids: readonly bigint[], count: number): void {
    expect(ids).toHaveLength(count)
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!, `row ${i}`).toBe(true)
  }

  it('repository.insert() of plain objects', async () => {
    const rows: Partial<Author>[] = shuffled('inserted', 300).map((email) => ({ email }))
    room()
    await dataSource.getRepository(Author).insert(rows)
    const ids = await received('authors', 'email', 'inserted-')
    expectAscending(ids, 300)
    expect(ids).toEqual(rows.map((row) => BigInt(row.id!)))
  })

  it('a query-builder insert().values([...])', async () => {
    const values: Partial<Author>[] = shuffled('built', 300).map((email) => ({ email }))
    room()
    await dataSource.createQueryBuilder().insert().into(Author).values(values).execute()
    const ids = await received('authors', 'email', 'built-')
    expectAscending(ids, 300)
    expect(ids).toEqual(values.map((row) => BigInt(row.id!)))
  })

  it('cascaded children: posts of many authors, each with comments, in one save()', async () => {
    const authors = shuffled('cascade', 60).map((email) => Object.assign(new Author(), { email }))
    room()
    await dataSource.getRepository(Author).save(authors)
    const posts = authors.map((author, i) =>
      Object.assign(new Post(), {
        author,
        title: `cascade post ${i}`,
        comments: [0, 1, 2].map((j) => Object.assign(new Comment(), { body: `cascade ${i}.${j}` })),
      }),
    )
    room()
    await dataSource.getRepository(Post).save(posts)
    expectAscending(await received('posts', 'title', 'cascade post '), 60)
    expectAscending(await received('comments', 'body', 'cascade '), 180)
    for (const post of posts) {
      for (const comment of post.comments!) {
        expect(sharding.shardOfId(comment.id!)).toBe(sharding.shardOfId(post.author!.id))
      }
    }
  })
})
