/**
 * IDs the extension did not make, through raw SQL on PostgreSQL: a caller's ID must be on the
 * shard its rule gives (own key, parent, fixed shard; children follow a kept one; also rows for
 * assignShardedIds), a flush may not move a stored row's key to another shard than its ID's, and
 * trustSuppliedIds turns both off for imports. Then the options refused, and where a key must be
 * normalized for the ID to follow it.
 */

import type { EntityData, MikroORM } from '@mikro-orm/core'
import { BeforeCreate, BeforeUpdate, Entity, Property } from '@mikro-orm/decorators/legacy'
import {
  blogSchemaSql,
  CountingSource,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import {
  InProcessSource,
  InvalidArgumentError,
  MisplacedIdError,
  ShardKeyChangedError,
  UnsafeNumberError,
} from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { assignShardedIds, shardedId, shardedIds, trustSuppliedIds } from '../src'
import { ShardedId } from '../src/legacy'
import { shardMigration } from '../src/migrations'
import { openOrm } from './support/blog'
import { Author, Comment, Keyed, Post } from './support/entities-legacy'

/** Keys lowercased by @BeforeCreate and @BeforeUpdate hooks (too late for the ID). */
@Entity({ tableName: 'late_keyed' })
class LateNormalizedKeyed {
  @ShardedId({ shardBy: 'shardKey' }) id!: bigint
  @Property({ type: 'string', nullable: true }) shardKey!: string | null
  @BeforeCreate()
  @BeforeUpdate()
  normalize() {
    this.shardKey = this.shardKey?.toLowerCase() ?? null
  }
}

/** Every row on shard 3. */
@Entity({ tableName: 'pinned' })
class PinnedKeyed {
  @ShardedId({ shard: 3 }) id!: bigint
  @Property({ type: 'string', nullable: true }) shardKey!: string | null
}

const sharding = testSharding(64)
const n = sharding.logicalShards
const counting = new CountingSource(new InProcessSource({ sharding, shards: 'all' }))
const idOn = (shard: number, sequence: number) =>
  sharding.layout.compose({ timestamp: Date.now() - 86_400_000, shard, sequence })
const shardOf = (id: unknown) => sharding.shardOfId(String(id))
/** The first `prefix-0`, `prefix-1`, ... whose shard is (or is not) `shard`. */
const keyWhere = (prefix: string, onShard: boolean, shard: number) => {
  for (let i = 0; ; i++) {
    const key = `${prefix}-${i}`
    if ((sharding.shardForKey(key) === shard) === onShard) return key
  }
}
let raw: RawDatabase
let orm: MikroORM

beforeAll(async () => {
  raw = await freshDatabase('postgres', 'sf_mikro_checked')
  for (const sql of blogSchemaSql('postgres')) await raw.query(sql)
  for (const table of ['late_keyed', 'pinned']) {
    await raw.query(`CREATE TABLE ${table} (id BIGINT NOT NULL PRIMARY KEY, shard_key TEXT NULL)`)
  }
  orm = await openOrm(
    'postgres',
    raw.url,
    [Author, Post, Comment, Keyed, LateNormalizedKeyed, PinnedKeyed],
    [shardedIds({ source: counting })],
  )
})
afterAll(async () => {
  await orm?.close(true)
  await raw?.close()
  counting.close()
})
beforeEach(() => counting.reset())

const count = async (sql: string) => Number((await raw.query(sql))[0]?.n)

describe('IDs the caller gives', () => {
  it('refuses a post with a misplaced ID and its comments, before anything is written or allocated', async () => {
    const em = orm.em.fork()
    const author = em.create(Author, { email: 'misplaced@example.com' })
    const post = em.create(Post, {
      id: idOn((sharding.shardForKey('misplaced@example.com') + 1) % n, 61),
      author,
      title: 'misplaced',
    })
    em.create(Comment, { post, body: 'under a misplaced post' })
    counting.reset()
    await expect(em.flush()).rejects.toBeInstanceOf(MisplacedIdError)
    expect(
      await count(`SELECT COUNT(*) AS n FROM authors WHERE email = 'misplaced@example.com'`),
    ).toBe(0)
    expect(counting.idsIssued).toBe(0)
  })

  it('inside trustSuppliedIds keeps it, and the comments follow the ID', async () => {
    const em = orm.em.fork()
    const author = em.create(Author, { email: 'imported@example.com' })
    const shard = (shardOf(author.id) + 1) % n
    const post = em.create(Post, { id: idOn(shard, 62), author, title: 'imported' })
    const comment = em.create(Comment, { post, body: 'imported' })
    await trustSuppliedIds(() => em.flush())
    expect(shardOf(comment.id)).toBe(shard)
    const [row] = await raw.query(`SELECT id FROM comments WHERE post_id = $1`, [String(post.id)])
    expect(shardOf(row?.id)).toBe(shard)
    await raw.query('DELETE FROM comments WHERE post_id = $1', [String(post.id)])
    await raw.query('DELETE FROM posts WHERE id = $1', [String(post.id)])
  })

  it('checks a fixed shard, and the rows given to assignShardedIds', async () => {
    const em = orm.em.fork()
    em.create(PinnedKeyed, { id: idOn(4, 63), shardKey: 'pinned' })
    await expect(em.flush()).rejects.toBeInstanceOf(MisplacedIdError)
    const author = await orm.em.fork().findOneOrFail(Author, { email: 'imported@example.com' })
    const rows = [{ id: idOn((shardOf(author.id) + 1) % n, 64), author: author.id, title: 'rows' }]
    await expect(assignShardedIds(orm.em.fork(), Post, rows)).rejects.toBeInstanceOf(
      MisplacedIdError,
    )
    // Rows parsed from a JSON export: JSON.parse reads the ID into a number that lost digits.
    const exported = `[{ "id": ${idOn(shardOf(author.id), 65)}, "author": "${author.id}", "title": "rows" }]`
    const unsafe: EntityData<Post>[] = JSON.parse(exported)
    await expect(assignShardedIds(orm.em.fork(), Post, unsafe)).rejects.toBeInstanceOf(
      UnsafeNumberError,
    )
    const right = [{ id: idOn(shardOf(author.id), 66), author: author.id, title: 'rows' }]
    expect(await assignShardedIds(orm.em.fork(), Post, right)).toBe(right)
  })
})

describe('a stored row whose key moves to another shard', () => {
  it('refuses a flush that moves a loaded row to a key on another shard; allows the same shard, and anything trusted', async () => {
    const setup = orm.em.fork()
    const row = setup.create(Keyed, { shardKey: 'flushed' })
    await setup.flush()
    const shard = shardOf(row.id)
    const em = orm.em.fork()
    const loaded = await em.findOneOrFail(Keyed, row.id)
    loaded.shardKey = keyWhere('flushed', false, shard)
    await expect(em.flush()).rejects.toBeInstanceOf(ShardKeyChangedError)
    const stored = async () =>
      (await raw.query('SELECT shard_key FROM keyed WHERE id = $1', [String(row.id)]))[0]?.shard_key
    expect(await stored()).toBe('flushed')
    const same = orm.em.fork()
    const again = await same.findOneOrFail(Keyed, row.id)
    again.shardKey = keyWhere('flushed', true, shard)
    await same.flush()
    expect(await stored()).toBe(again.shardKey)
    again.shardKey = keyWhere('flushed trusted', false, shard)
    await trustSuppliedIds(() => same.flush())
    expect(await stored()).toBe(again.shardKey)
    await raw.query('DELETE FROM keyed WHERE id = $1', [String(row.id)])
  })
})

describe('keys normalized too late', () => {
  it('refuses a flush whose @BeforeCreate or @BeforeUpdate hook moves the key to another shard after the ID was made, writing nothing', async () => {
    // The ID is made from 'Acme' (at em.create() or onFlush); the hook then stores 'acme',
    // which hashes elsewhere.
    expect(sharding.shardForKey('Acme')).not.toBe(sharding.shardForKey('acme'))
    const em = orm.em.fork()
    em.create(LateNormalizedKeyed, { shardKey: 'Acme' })
    await expect(em.flush()).rejects.toBeInstanceOf(ShardKeyChangedError)
    expect(await count('SELECT COUNT(*) AS n FROM late_keyed')).toBe(0)
    // A hook that keeps the shard passes.
    const fine = orm.em.fork()
    const row = fine.create(LateNormalizedKeyed, { shardKey: 'acme' })
    await fine.flush()
    expect(shardOf(row.id)).toBe(sharding.shardForKey('acme'))
    // An update whose key is on the row's shard at onFlush, and off it once @BeforeUpdate ran.
    const shard = shardOf(row.id)
    let key = ''
    for (let i = 0; !key; i++) {
      const candidate = `Key-${i}`
      const lower = candidate.toLowerCase()
      if (sharding.shardForKey(candidate) === shard && sharding.shardForKey(lower) !== shard) {
        key = candidate
      }
    }
    row.shardKey = key
    await expect(fine.flush()).rejects.toBeInstanceOf(ShardKeyChangedError)
    const [stored] = await raw.query('SELECT shard_key FROM late_keyed WHERE id = $1', [
      String(row.id),
    ])
    expect(stored?.shard_key).toBe('acme')
  })
})

describe('options', () => {
  it('refuses a misspelt option of shardedIds() and shardedId(), naming the closest', () => {
    expect(() =>
      shardedIds({ source: counting, idtype: 'string' } as Parameters<typeof shardedIds>[0]),
    ).toThrow(/Did you mean "idType"/)
    expect(() =>
      shardedId({ shardBy: 'email', stringkeys: 'hash' } as Parameters<typeof shardedId>[0]),
    ).toThrow(InvalidArgumentError)
    expect(() =>
      ShardedId({ shardBy: 'email', fieldname: 'e' } as Parameters<typeof ShardedId>[0]),
    ).toThrow(/Did you mean "fieldName"/)
    expect(() =>
      shardMigration({ up: 'SELECT 1', dwon: 'SELECT 1' } as Parameters<typeof shardMigration>[0]),
    ).toThrow(/Did you mean "down"/)
  })
})
