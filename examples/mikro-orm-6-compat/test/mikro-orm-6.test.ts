/**
 * What differs on MikroORM 6.6, on PostgreSQL, checked through raw SQL: IDs appear at flush
 * (unless `processOnCreateHooksEarly` is on), `em.upsert()` gets its ID from the subscriber's
 * `beforeUpsert` for every source, and `assignShardedIds` serves `em.insertMany`.
 */

import type { MikroORM, UpsertOptions } from '@mikro-orm/core'
import * as mikroOrmCore from '@mikro-orm/core'
import { defineEntity, p } from '@mikro-orm/core'
import { MikroORM as PostgresOrm } from '@mikro-orm/postgresql'
import {
  asAsync,
  blogSchemaSql,
  CountingSource,
  expectedShard,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import {
  InProcessSource,
  InvalidShardRuleError,
  MissingShardKeyError,
  ShardKeyChangedError,
} from '@shardflake/core'
import { assignShardedIds, shardedId, shardedIds } from '@shardflake/mikro-orm'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { openOrm } from './support/blog'
import { Author, Comment, DefinedAuthor, DefinedPost, Post } from './support/entities'

const logicalShards = 64
const sharding = testSharding(logicalShards)
const entities = [Author, Post, Comment]
const shardOf = (id: unknown) => sharding.shardOfId(String(id))

let raw: RawDatabase
const inProcess = new InProcessSource({ sharding, shards: 'all' })
const sync = new CountingSource(inProcess)
const async = new CountingSource(asAsync(inProcess))
let syncOrm: MikroORM
let asyncOrm: MikroORM

beforeAll(async () => {
  raw = await freshDatabase('postgres', 'sf_mikro6_unit')
  for (const sql of blogSchemaSql('postgres')) await raw.query(sql)
  syncOrm = await openOrm('postgres', raw.url, entities, [shardedIds({ source: sync })])
  asyncOrm = await openOrm('postgres', raw.url, entities, [shardedIds({ source: async })])
})
afterAll(async () => {
  await syncOrm?.close(true)
  await asyncOrm?.close(true)
  await raw?.close()
  inProcess.close()
})
beforeEach(() => {
  sync.reset()
  async.reset()
})

const count = async (sql: string, params: unknown[] = []) =>
  Number((await raw.query(sql, params))[0]?.n)

it('runs on MikroORM 6: the package and the driver share @mikro-orm/core 6', () => {
  expect(syncOrm.config.getMetadataProvider().constructor.name).toBe('ReflectMetadataProvider')
  expect(typeof (mikroOrmCore as Record<string, unknown>).PrimaryKey).toBe('function')
  expect(mikroOrmCore.Utils.getORMVersion()).toMatch(/^6\.6\./)
})

describe('with an in-process (sync) source', () => {
  it('assigns the ID at flush (MikroORM 6 runs onCreate late), children on their parent shard', async () => {
    const em = syncOrm.em.fork()
    const author = em.create(Author, { email: 'late6@example.com' })
    const post = em.create(Post, { author, title: 'v6 post' })
    expect(author.id).toBeUndefined()
    await em.flush()
    expect(shardOf(author.id)).toBe(expectedShard('late6@example.com', logicalShards))
    expect(shardOf(post.id)).toBe(shardOf(author.id))
    expect(
      await count('SELECT COUNT(*) AS n FROM posts WHERE id = $1 AND author_id = $2', [
        post.id,
        author.id,
      ]),
    ).toBe(1)
  })

  it('sends a flush of many shards in ID order (IDs given one at a time as MikroORM 6 computes the flush)', async () => {
    // The order the server received the rows in (the entities do not map it).
    await raw.query('ALTER TABLE authors ADD COLUMN IF NOT EXISTS seq BIGSERIAL')
    const em = syncOrm.em.fork()
    const emails = Array.from({ length: 200 }, (_, i) => `order6-${(i * 7919) % 200}@example.com`)
    const authors = emails.map((email) => em.create(Author, { email }))
    await em.flush()
    const given = authors.map((author) => BigInt(String(author.id)))
    expect(given.every((id, i) => i === 0 || id > given[i - 1]!)).toBe(false)
    const rows = await raw.query(
      "SELECT id::text AS id, email FROM authors WHERE email LIKE 'order6-%' ORDER BY seq",
    )
    expect(rows).toHaveLength(200)
    const ids = rows.map((row) => BigInt(String(row.id)))
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!, `row ${i}`).toBe(true)
    expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(
      [...given].sort((a, b) => (a < b ? -1 : 1)),
    )
  })

  it('gives the ID at em.create() with processOnCreateHooksEarly', async () => {
    const orm = await PostgresOrm.init({
      clientUrl: raw.url,
      entities: [DefinedAuthor, DefinedPost],
      extensions: [shardedIds({ source: sync })],
      processOnCreateHooksEarly: true,
    })
    try {
      const em = orm.em.fork()
      const author = em.create(DefinedAuthor, { email: 'early6@example.com' })
      expect(typeof author.id).toBe('bigint')
      expect(shardOf(author.id)).toBe(expectedShard('early6@example.com', logicalShards))
      await em.flush()
      expect(await count('SELECT COUNT(*) AS n FROM authors WHERE id = $1', [author.id])).toBe(1)
    } finally {
      await orm.close(true)
    }
  })

  it('upserts with an ID from beforeUpsert (MikroORM 6 runs no onCreate there), keeping the stored ID on conflict with onConflictExcludeFields', async () => {
    const options: UpsertOptions<Author, 'id'> = { onConflictExcludeFields: ['id'] }
    const first = await syncOrm.em.fork().upsert(Author, { email: 'upsert6@example.com' }, options)
    const again = await syncOrm.em.fork().upsert(Author, { email: 'upsert6@example.com' }, options)
    expect(typeof first.id).toBe('bigint')
    expect(String(again.id)).toBe(String(first.id))
    expect(shardOf(first.id)).toBe(expectedShard('upsert6@example.com', logicalShards))
    const rows = await raw.query(
      "SELECT id::text AS id FROM authors WHERE email = 'upsert6@example.com'",
    )
    expect(rows.map((row) => row.id)).toEqual([String(first.id)])
  })

  it('overwrites the stored ID on conflict without onConflictExcludeFields (MikroORM 6 merges every given field; 7 excludes onCreate keys)', async () => {
    const first = await syncOrm.em.fork().upsert(Author, { email: 'overwrite6@example.com' })
    const again = await syncOrm.em.fork().upsert(Author, { email: 'overwrite6@example.com' })
    expect(again.id).not.toBe(first.id)
    const rows = await raw.query(
      "SELECT id::text AS id FROM authors WHERE email = 'overwrite6@example.com'",
    )
    expect(rows.map((row) => row.id)).toEqual([String(again.id)])
  })

  it('checks shard rules when MikroORM 6 starts: shardBy on a sharded relation is refused, naming sameShardAs', async () => {
    const Misplaced = defineEntity({
      name: 'Misplaced',
      tableName: 'posts',
      properties: {
        id: shardedId({ shardBy: 'author' }),
        author: () => p.manyToOne(DefinedAuthor),
        title: p.string(),
      },
    })
    const failure = openOrm(
      'postgres',
      raw.url,
      [DefinedAuthor, Misplaced],
      [shardedIds({ source: sync })],
    )
    await expect(failure).rejects.toBeInstanceOf(InvalidShardRuleError)
    await expect(failure).rejects.toThrow("{ sameShardAs: 'author' }")
  })

  it('refuses a new entity without its shard key before writing anything', async () => {
    const em = syncOrm.em.fork()
    em.create(Post, { title: 'orphan v6' } as Post)
    await expect(em.flush()).rejects.toBeInstanceOf(MissingShardKeyError)
    expect(await count("SELECT COUNT(*) AS n FROM posts WHERE title = 'orphan v6'")).toBe(0)
  })
})

describe('with an async (database-like) source', () => {
  it('assigns a whole flush in one nextIds per shard, children carrying their parent keys', async () => {
    const em = asyncOrm.em.fork()
    const author = em.create(Author, { email: 'async6@example.com' })
    const posts = [0, 1, 2].map((i) => em.create(Post, { author, title: `async6 ${i}` }))
    const comments = posts.map((post) => em.create(Comment, { post, body: 'hi' }))
    await em.flush()
    // The author's shard (its email) and the posts' (the author's): the same shard, one call.
    expect(async.nextIdsCalls).toBe(1)
    expect(async.idsIssued).toBe(7)
    for (const comment of comments) {
      expect(shardOf(comment.id)).toBe(shardOf(author.id))
    }
    expect(
      await count(
        'SELECT COUNT(*) AS n FROM comments c JOIN posts p ON p.id = c.post_id WHERE p.author_id = $1',
        [author.id],
      ),
    ).toBe(3)
  })

  it('points an existing entity at a new one of the same flush (an UPDATE with its new key), on its shard', async () => {
    const from = 'moved6-from@example.com'
    /** The first `moved6-to-<i>@example.com` on (or off) the shard of `from`. */
    const emailOf = (same: boolean) => {
      for (let i = 0; ; i++) {
        const email = `moved6-to-${i}@example.com`
        const shard = expectedShard(email, logicalShards)
        if ((shard === expectedShard(from, logicalShards)) === same) return email
      }
    }
    const setup = asyncOrm.em.fork()
    const post = setup.create(Post, {
      author: setup.create(Author, { email: from }),
      title: 'v6 to be moved',
    })
    await setup.flush()
    const em = asyncOrm.em.fork()
    const loaded = await em.findOneOrFail(Post, post.id)
    const newcomer = em.create(Author, { email: emailOf(true) })
    loaded.author = newcomer
    await em.flush()
    const author = async () =>
      (await raw.query('SELECT author_id::text AS author FROM posts WHERE id = $1', [post.id]))[0]
        ?.author
    expect(await author()).toBe(String(newcomer.id))
    // A new author on another shard: the post's ID cannot follow it.
    const other = asyncOrm.em.fork()
    const again = await other.findOneOrFail(Post, post.id)
    again.author = other.create(Author, { email: emailOf(false) })
    await expect(other.flush()).rejects.toBeInstanceOf(ShardKeyChangedError)
    expect(await author()).toBe(String(newcomer.id))
  })

  it('upserts with an ID from beforeUpsert, keeping the stored ID with onConflictExcludeFields', async () => {
    const options: UpsertOptions<Author, 'id'> = {
      onConflictFields: ['email'],
      onConflictExcludeFields: ['id'],
    }
    const first = await asyncOrm.em
      .fork()
      .upsert(Author, { email: 'async-upsert6@example.com' }, options)
    const again = await asyncOrm.em
      .fork()
      .upsert(Author, { email: 'async-upsert6@example.com' }, options)
    expect(String(again.id)).toBe(String(first.id))
    expect(
      await count('SELECT COUNT(*) AS n FROM authors WHERE id = $1 AND email = $2', [
        first.id,
        'async-upsert6@example.com',
      ]),
    ).toBe(1)
  })

  it('serves em.insertMany through assignShardedIds, one nextIds per shard', async () => {
    const em = asyncOrm.em.fork()
    const [author] = await assignShardedIds(em, Author, [{ email: 'bulk6@example.com' }])
    await em.insertMany(Author, [author!])
    async.reset()
    const rows = await assignShardedIds(em, Post, [
      { author: author!.id, title: 'bulk6 a' },
      { author: author!.id, title: 'bulk6 b' },
    ])
    await em.insertMany(Post, rows)
    expect(async.nextIdsCalls).toBe(1)
    const stored = await raw.query(
      "SELECT id::text AS id, author_id::text AS author FROM posts WHERE title LIKE 'bulk6 %' ORDER BY id",
    )
    expect(stored).toEqual(rows.map((row) => ({ id: String(row.id), author: String(author!.id) })))
    for (const row of rows) {
      expect(shardOf(row.id)).toBe(shardOf(author!.id))
    }
  })
})
