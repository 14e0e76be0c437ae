/**
 * Interactive transactions with a database source on a small pool: the extension allocates
 * through the source's own connections, never Prisma's, so transactions that hold every Prisma
 * connection cannot starve it. And the PostgreSQL column DEFAULT `shard_5.next_id()` as a safety
 * net for writes that bypass the extension.
 */
import { type RawDatabase, testSharding } from '@shardflake/conformance'
import { setDefault } from '@shardflake/postgres'
import { afterAll, describe, expect, it } from 'vitest'
import { PrismaClient } from '../generated/pg/client/client'
import { mysqlClient, pgClient } from './support/clients'
import { blogDatabase } from './support/database'
import { endSourcePools, mysqlSource, postgresSource } from './support/sources'

const sharding = testSharding(8)

const databases: RawDatabase[] = []
afterAll(async () => {
  await endSourcePools()
  await Promise.all(databases.map((raw) => raw.close()))
})

const transactions = 24
const options = { maxWait: 20_000, timeout: 20_000 }

async function check(raw: RawDatabase, authorIds: bigint[]) {
  const [stats] = await raw.query(
    `SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM comments WHERE body LIKE 'tx %'`,
  )
  expect(Number(stats?.n)).toBe(transactions * 2)
  expect(Number(stats?.d)).toBe(transactions * 2)
  for (const row of await raw.query('SELECT id, author_id FROM posts')) {
    expect(authorIds.map(String)).toContain(String(row.author_id))
    expect(sharding.shardOfId(String(row.id))).toBe(sharding.shardOfId(String(row.author_id)))
  }
}

describe(`${transactions} concurrent interactive transactions, 2 Prisma connections, 2 source connections`, () => {
  it('PostgreSQL (adapter-pg, PostgresSource)', async () => {
    const raw = await blogDatabase('postgres', 'sf_prisma_pg_tx')
    databases.push(raw)
    const prisma = pgClient(raw.url, await postgresSource(raw, sharding), 2)
    try {
      const authors = await prisma.author.createManyAndReturn({
        data: ['a@tx', 'b@tx', 'c@tx'].map((email) => ({ email })),
      })
      const ids = authors.map((author) => author.id)
      await Promise.all(
        Array.from({ length: transactions }, (_, i) =>
          prisma.$transaction(async (tx) => {
            const post = await tx.post.create({
              data: {
                authorId: ids[i % 3]!,
                title: `tx ${i}`,
                comments: { create: { body: `tx ${i} a` } },
              },
            })
            await tx.comment.create({ data: { postId: post.id, body: `tx ${i} b` } })
          }, options),
        ),
      )
      await check(raw, ids)
    } finally {
      await prisma.$disconnect()
    }
  })

  it('MariaDB (adapter-mariadb, MysqlSource)', async () => {
    const raw = await blogDatabase('mysql', 'sf_prisma_my_tx')
    databases.push(raw)
    const prisma = mysqlClient(raw.url, await mysqlSource(raw, sharding), 2)
    try {
      const ids: bigint[] = []
      for (const email of ['a@tx', 'b@tx', 'c@tx']) {
        ids.push((await prisma.author.create({ data: { email } })).id)
      }
      await Promise.all(
        Array.from({ length: transactions }, (_, i) =>
          prisma.$transaction(async (tx) => {
            const post = await tx.post.create({
              data: {
                authorId: ids[i % 3]!,
                title: `tx ${i}`,
                comments: { create: { body: `tx ${i} a` } },
              },
            })
            await tx.comment.create({ data: { postId: post.id, body: `tx ${i} b` } })
          }, options),
        ),
      )
      await check(raw, ids)
    } finally {
      await prisma.$disconnect()
    }
  })
})

describe('PostgreSQL column DEFAULT shard_5.next_id() as a safety net', () => {
  it('fills rows written without the extension; the extension still places its own', async () => {
    const raw = await blogDatabase('postgres', 'sf_prisma_pg_default')
    databases.push(raw)
    const source = await postgresSource(raw, sharding)
    await setDefault(
      { query: (sql, params) => raw.query(sql, params).then((rows) => ({ rows })) },
      {
        table: 'posts',
        shard: 5,
      },
    )
    const { PrismaPg } = await import('@prisma/adapter-pg')
    const plain = new PrismaClient({ adapter: new PrismaPg({ connectionString: raw.url }) })
    const extended = pgClient(raw.url, source)
    try {
      const author = await extended.author.create({ data: { email: 'default@example.com' } })
      // Without the extension Prisma sends no ID, the column DEFAULT makes one and RETURNING reads it.
      const bypass = await plain.post.create({ data: { authorId: author.id, title: 'bypass' } })
      expect(sharding.shardOfId(bypass.id)).toBe(5)
      await raw.query('INSERT INTO posts (author_id, title) VALUES ($1, $2)', [
        author.id.toString(),
        'raw sql',
      ])
      const [rawRow] = await raw.query(`SELECT id FROM posts WHERE title = 'raw sql'`)
      expect(sharding.shardOfId(String(rawRow?.id))).toBe(5)
      const placed = await extended.post.create({
        data: { authorId: author.id, title: 'extension' },
      })
      expect(sharding.shardOfId(placed.id)).toBe(sharding.shardOfId(author.id))
      const [stats] = await raw.query('SELECT COUNT(DISTINCT id) AS d FROM posts')
      expect(Number(stats?.d)).toBe(3)
    } finally {
      await plain.$disconnect()
      await extended.$disconnect()
    }
  })
})
