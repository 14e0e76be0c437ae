/**
 * Every way MikroORM inserts entities sends a sharded table's rows in ascending ID order, as
 * AUTO_INCREMENT does: IDs from `em.create()` (given one at a time, interleaved across shards),
 * `new` + `em.persist()`, keys placed at flush, an asynchronous source, and `em.insertMany()` of
 * entities. The order is read from the server: each table has a `seq` column the database fills
 * in the order it receives the rows.
 */
import { defineEntity, type MikroORM, p } from '@mikro-orm/core'
import { Entity, Property } from '@mikro-orm/decorators/legacy'
import {
  asAsync,
  type Dialect,
  expectedShard,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedId, shardedIds } from '../src'
import { ShardedId } from '../src/legacy'
import { openOrm } from './support/blog'

const sharding = testSharding(64)
const source = new InProcessSource({ sharding, shards: 'all' })
afterAll(() => source.close())

const Member = defineEntity({
  name: 'Member',
  tableName: 'members',
  properties: {
    id: shardedId<{ email: string }>({ shardBy: 'email' }),
    email: p.string(),
  },
})
/** A decorated class, made with `new`: MikroORM runs its `onCreate` while it computes the flush. */
@Entity({ tableName: 'readers' })
class Reader {
  @ShardedId<Reader>({ shardBy: 'email' }) id!: bigint
  @Property({ type: 'string' }) email!: string
}
/** A self-referencing table: a reply references an earlier note of the same batch. */
const Thread = defineEntity({
  name: 'Thread',
  tableName: 'threads',
  properties: {
    id: shardedId({ shard: 3 }),
    parent: () => p.manyToOne(Thread).nullable(),
    body: p.string(),
  },
})

function schema(dialect: Dialect): string[] {
  if (dialect === 'postgres') {
    return [
      'CREATE TABLE members (id BIGINT NOT NULL PRIMARY KEY, email TEXT NOT NULL, seq BIGSERIAL)',
      'CREATE TABLE threads (id BIGINT NOT NULL PRIMARY KEY, parent_id BIGINT REFERENCES threads, body TEXT NOT NULL, seq BIGSERIAL)',
      'CREATE TABLE readers (id BIGINT NOT NULL PRIMARY KEY, email TEXT NOT NULL, seq BIGSERIAL)',
    ]
  }
  return [
    'CREATE TABLE members (id BIGINT NOT NULL PRIMARY KEY, email VARCHAR(100) NOT NULL, seq BIGINT NOT NULL AUTO_INCREMENT, KEY (seq))',
    'CREATE TABLE threads (id BIGINT NOT NULL PRIMARY KEY, parent_id BIGINT NULL, body VARCHAR(100) NOT NULL, seq BIGINT NOT NULL AUTO_INCREMENT, KEY (seq), FOREIGN KEY (parent_id) REFERENCES threads (id))',
    'CREATE TABLE readers (id BIGINT NOT NULL PRIMARY KEY, email VARCHAR(100) NOT NULL, seq BIGINT NOT NULL AUTO_INCREMENT, KEY (seq))',
  ]
}

/** `count` emails whose shards go down between neighbours about half the time. */
function shuffledEmails(prefix: string, count: number): string[] {
  const emails = Array.from(
    { length: count },
    (_, i) => `${prefix}-${(i * 7919) % count}@example.com`,
  )
  const shards = emails.map((email) => expectedShard(email, 64))
  expect(shards.filter((shard, i) => i > 0 && shard < shards[i - 1]!).length).toBeGreaterThan(
    count / 4,
  )
  return emails
}

for (const dialect of ['mysql', 'postgres'] as const) {
  describe(`inserts in ID order on ${dialect}`, () => {
    let raw: RawDatabase
    let orm: MikroORM
    let asyncOrm: MikroORM

    beforeAll(async () => {
      raw = await freshDatabase(dialect, `h24_ascending_mikro_${dialect}`)
      for (const sql of schema(dialect)) await raw.query(sql)
      orm = await openOrm(dialect, raw.url, [Member, Thread, Reader], [shardedIds({ source })])
      asyncOrm = await openOrm(
        dialect,
        raw.url,
        [Member, Thread, Reader],
        [shardedIds({ source: asAsync(source) })],
      )
    })
    afterAll(async () => {
      await orm?.close(true)
      await asyncOrm?.close(true)
      await raw?.close()
    })

    /** The IDs of the rows whose email starts with `prefix`, in the order the server got them. */
    async function stored(
      prefix: string,
      table = 'members',
    ): Promise<{ id: bigint; email: string }[]> {
      const cast = dialect === 'postgres' ? 'id::text' : 'CAST(id AS CHAR)'
      const rows = await raw.query(
        `SELECT ${cast} AS id, email FROM ${table} WHERE email LIKE '${prefix}-%' ORDER BY seq`,
      )
      return rows.map((row) => ({ id: BigInt(String(row.id)), email: String(row.email) }))
    }

    async function expectAscending(prefix: string, count: number, table = 'members') {
      const rows = await stored(prefix, table)
      expect(rows).toHaveLength(count)
      for (let i = 1; i < rows.length; i++) {
        expect(rows[i]!.id > rows[i - 1]!.id, `row ${i} of ${prefix}`).toBe(true)
      }
      for (const row of rows) {
        expect(sharding.shardOfId(row.id)).toBe(expectedShard(row.email, 64))
      }
    }

    it('em.create() (IDs given at create, one at a time) then flush', async () => {
      const em = orm.em.fork()
      const emails = shuffledEmails('created', 300)
      const members = emails.map((email) => em.create(Member, { email }))
      // The IDs came at em.create(), in creation order, interleaved across shards.
      const given = members.map((member) => BigInt(member.id))
      expect(given.every((id, i) => i === 0 || id > given[i - 1]!)).toBe(false)
      await em.flush()
      await expectAscending('created', 300)
      // Each entity kept the ID em.create() gave it.
      expect(members.map((member) => BigInt(member.id))).toEqual(given)
    })

    it('new + em.persist() then flush', async () => {
      const em = orm.em.fork()
      const readers = shuffledEmails('persisted', 300).map((email) =>
        Object.assign(new Reader(), { email }),
      )
      em.persist(readers)
      await em.flush()
      await expectAscending('persisted', 300, 'readers')
    })

    it('keys placed at flush (shard key set after em.create())', async () => {
      const em = orm.em.fork()
      for (const email of shuffledEmails('late', 300)) {
        const member = em.create(Member, {} as { email: string })
        member.email = email
      }
      await em.flush()
      await expectAscending('late', 300)
    })

    it('an asynchronous source (IDs per shard at flush)', async () => {
      const em = asyncOrm.em.fork()
      for (const email of shuffledEmails('fetched', 300)) em.create(Member, { email })
      await em.flush()
      await expectAscending('fetched', 300)
    })

    it('em.insertMany() of entities made by em.create()', async () => {
      const em = orm.em.fork()
      const members = shuffledEmails('many', 300).map((email) => em.create(Member, { email }))
      await em.insertMany(members)
      await expectAscending('many', 300)
    })

    /** 20 notes, then a reply to each; the notes have the higher IDs. */
    function threads(em: ReturnType<MikroORM['em']['fork']>, prefix: string) {
      const ids = source.nextIds(3, 40)
      const notes = Array.from({ length: 20 }, (_, i) =>
        em.create(Thread, { id: ids[20 + i]!, body: `${prefix} note ${i}` }),
      )
      const replies = notes.map((parent, i) => {
        const reply = em.create(Thread, { id: ids[i]!, body: `${prefix} reply ${i}` })
        reply.parent = parent
        return reply
      })
      expect(replies.every((reply, i) => reply.parent === notes[i])).toBe(true)
      return [...notes, ...replies]
    }
    const threadRows = async (prefix: string) =>
      (
        await raw.query(
          `SELECT ${dialect === 'postgres' ? 'id::text' : 'CAST(id AS CHAR)'} AS id, body, ${dialect === 'postgres' ? 'parent_id::text' : 'CAST(parent_id AS CHAR)'} AS parent FROM threads WHERE body LIKE '${prefix} %' ORDER BY seq`,
        )
      ).map((row) => ({ id: String(row.id), body: String(row.body), parent: row.parent }))

    it('a self-referencing table in a flush: ascending, the links set after the INSERT', async () => {
      const em = orm.em.fork()
      const made = threads(em, 'flushed')
      await em.flush()
      const rows = await threadRows('flushed')
      expect(rows.map((row) => BigInt(row.id))).toEqual(
        made.map((thread) => BigInt(thread.id)).sort((a, b) => (a < b ? -1 : 1)),
      )
      made.forEach((thread, i) => {
        const row = rows.find((candidate) => candidate.id === String(thread.id))
        expect(row?.parent ?? null).toBe(i < 20 ? null : String(made[i - 20]!.id))
      })
    })
  })
}
