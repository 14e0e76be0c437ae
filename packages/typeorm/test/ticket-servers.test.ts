/**
 * Flickr-style ticket servers through `@ShardedId`: their IDs carry no time and no shard, so the
 * subscriber asks for them without a shard (every rule reads shard 0) and stores them as they
 * come. Two ticket databases with offsets 1 and 2 act as the two servers; rows are read back raw.
 */
import { blogSchemaSql, freshDatabase, type RawDatabase } from '@shardflake/conformance'
import { createMysqlPool, TicketServerSource } from '@shardflake/mysql'
import type { Pool, RowDataPacket } from 'mysql2/promise'
import type { DataSource } from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Author, blogDataSource, Comment, Post } from './blog'

const TICKETS = ['sf_typeorm_tix_a', 'sf_typeorm_tix_b']
let raw: RawDatabase
let pool: Pool
let source: TicketServerSource
let dataSource: DataSource

beforeAll(async () => {
  raw = await freshDatabase('mysql', 'sf_typeorm_tickets')
  for (const statement of blogSchemaSql('mysql')) await raw.query(statement)
  pool = await createMysqlPool({ uri: raw.url, connectionLimit: 8 })
  for (const db of TICKETS) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
  source = new TicketServerSource({
    servers: TICKETS.map((database) => ({ pool, database })),
    sequence: 'blog',
  })
  await source.install()
  dataSource = await blogDataSource(raw, source)
})

afterAll(async () => {
  await dataSource?.destroy()
  for (const db of TICKETS) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
  await pool.end()
  await raw.close()
})

async function allIds(): Promise<bigint[]> {
  const rows = await raw.query(
    'SELECT CAST(id AS CHAR) AS id FROM authors UNION ALL SELECT CAST(id AS CHAR) FROM posts UNION ALL SELECT CAST(id AS CHAR) FROM comments',
  )
  return rows.map((row) => BigInt(String(row.id)))
}

describe('TypeORM with TicketServerSource (MariaDB)', () => {
  it('gives every insert path plain tickets from the servers, kept on the entities', async () => {
    const author = await dataSource
      .getRepository(Author)
      .save(Object.assign(new Author(), { email: 'tickets@example.com' }))
    const post = await dataSource.getRepository(Post).save(
      Object.assign(new Post(), {
        authorId: author.id,
        title: 'cascade',
        comments: ['a', 'b', 'c'].map((body) => Object.assign(new Comment(), { body })),
      }),
    )
    const many = await dataSource
      .getRepository(Post)
      .save(
        Array.from({ length: 20 }, (_, i) =>
          Object.assign(new Post(), { authorId: author.id, title: `many ${i}` }),
        ),
      )
    const assigned = [
      author.id,
      post.id,
      ...post.comments!.map((c) => c.id),
      ...many.map((p) => p.id),
    ]
    for (const id of assigned) expect(id).toMatch(/^[1-9]\d*$/)
    const stored = await allIds()
    expect(stored.sort((a, b) => (a < b ? -1 : 1))).toEqual(
      assigned.map((id) => BigInt(id!)).sort((a, b) => (a < b ? -1 : 1)),
    )
    // Each server hands out its own residue class (offset 1: odd, offset 2: even).
    const [[a]] = await pool.query<RowDataPacket[]>(
      `SELECT CAST(id AS CHAR) AS id FROM \`${TICKETS[0]}\`.tickets64_blog`,
    )
    expect(BigInt(a!.id) % 2n).toBe(1n)
    const [comment] = await raw.query('SELECT post_id FROM comments LIMIT 1')
    expect(String(comment!.post_id)).toBe(post.id)
  })

  it('never repeats a ticket across 16 concurrent save() loops', async () => {
    const before = (await allIds()).length
    const author = await dataSource
      .getRepository(Author)
      .save(Object.assign(new Author(), { email: 'loops@example.com' }))
    await Promise.all(
      Array.from({ length: 16 }, async (_, loop) => {
        for (let i = 0; i < 10; i++) {
          await dataSource
            .getRepository(Post)
            .save(
              Array.from({ length: 1 + (i % 3) }, (_, j) =>
                Object.assign(new Post(), { authorId: author.id, title: `${loop}.${i}.${j}` }),
              ),
            )
        }
      }),
    )
    const ids = await allIds()
    const rowsPerLoop = Array.from({ length: 10 }, (_, i) => 1 + (i % 3)).reduce((a, b) => a + b)
    expect(ids.length - before).toBe(1 + 16 * rowsPerLoop)
    expect(new Set(ids).size).toBe(ids.length)
  })
})
