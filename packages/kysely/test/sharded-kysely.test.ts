/**
 * shardedKysely() beyond the routed conformance suite: the guard on every Kysely the router
 * hands out, whatever the write path; the routed insert with an asynchronous source; and the
 * refusals of a bad setup or a query the router cannot place. Two fresh databases on the shared
 * PostgreSQL server play servers a (shards 0-31) and b (32-63).
 */
import {
  asAsync,
  blogSchemaSql,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidArgumentError,
  MissingShardKeyError,
  ShardHomes,
  ShardMap,
  ShardOutOfRangeError,
  trustSuppliedIds,
  WrongServerError,
} from '@shardflake/core'
import { Kysely, type KyselyPlugin, sql, type ValuesNode } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ShardedKysely, shardedIds, shardedKysely } from '../src'
import { type BlogDatabase, blogDialect, blogIds } from './support/blog'

const sharding = testSharding()
const map = new ShardMap(sharding, [
  { from: 0, to: 31, target: 'a' },
  { from: 32, to: 63, target: 'b' },
])
const source = new InProcessSource({ sharding, shards: 'all' })

interface Database extends BlogDatabase {
  plain: { id: string; note: string }
}

/** A plugin that gives every new row the ID `id`, in the key column the plugin before it filled. */
function rekey(id: bigint): KyselyPlugin {
  return {
    transformQuery: ({ node }) => {
      if (node.kind !== 'InsertQueryNode' || node.values?.kind !== 'ValuesNode') return node
      const at = (node.columns ?? []).findIndex((column) => column.column.name === 'id')
      const rows = (node.values as ValuesNode).values.map((row) =>
        row.kind === 'PrimitiveValueListNode' ? { ...row, values: row.values.with(at, id) } : row,
      )
      return { ...node, values: { kind: 'ValuesNode', values: rows } }
    },
    transformResult: async ({ result }) => result,
  }
}

describe('shardedKysely (PostgreSQL)', () => {
  const raws: Record<string, RawDatabase> = {}
  const servers: Record<string, Kysely<Database>> = {}
  /** Statements each server's Kysely sent, from its log. */
  const sent: Record<string, number> = { a: 0, b: 0 }
  let homes: ShardHomes<Kysely<Database>>
  let sharded: ShardedKysely<Database>

  beforeAll(async () => {
    const ids = blogIds(source)
    for (const name of ['a', 'b']) {
      const raw = await freshDatabase('postgres', `sf_kysely_routed_${name}`)
      for (const statement of blogSchemaSql('postgres')) await raw.query(statement)
      await raw.query('CREATE TABLE plain (id BIGINT PRIMARY KEY, note TEXT NOT NULL)')
      raws[name] = raw
      servers[name] = new Kysely<Database>({
        dialect: ids.dialect(blogDialect('postgres', raw.url)),
        plugins: [ids],
        log: (event) => {
          if (event.level === 'query') sent[name]!++
        },
      })
    }
    homes = await ShardHomes.open({ sharding, servers, directory: map })
    sharded = shardedKysely(homes)
  })

  afterAll(async () => {
    await homes?.close()
    for (const db of Object.values(servers)) await db.destroy()
    for (const raw of Object.values(raws)) await raw.close()
  })

  async function keyedRows(name: string): Promise<string[]> {
    const rows = await raws[name]!.query('SELECT shard_key FROM keyed ORDER BY shard_key')
    return rows.map((row) => String(row.shard_key))
  }

  async function clearKeyed(): Promise<void> {
    for (const raw of Object.values(raws)) await raw.query('DELETE FROM keyed')
  }

  it('refuses a row written through the Kysely of another server, on every path', async () => {
    await clearKeyed()
    // Shard 40 lives on b; each write goes through a's guarded Kysely.
    const a = sharded.forServer('a')
    const attempts: [string, () => Promise<unknown>][] = [
      ['insert', () => a.insertInto('keyed').values({ shard_key: '40' }).execute()],
      [
        'a row of b in a batch of a',
        () =>
          a
            .insertInto('keyed')
            .values([{ shard_key: '1' }, { shard_key: '41' }])
            .execute(),
      ],
      [
        'an insert in a WITH clause',
        () =>
          a
            .with('made', (db) =>
              db.insertInto('keyed').values({ shard_key: '42' }).returning('id'),
            )
            .selectFrom('made')
            .selectAll()
            .execute(),
      ],
      [
        'an upsert',
        () =>
          a
            .insertInto('keyed')
            .values({ shard_key: '43' })
            .onConflict((oc) => oc.column('id').doNothing())
            .execute(),
      ],
      [
        'a supplied ID, trusted',
        () =>
          trustSuppliedIds(() =>
            a
              .insertInto('keyed')
              .values({ id: source.nextId(44), shard_key: '44' })
              .execute(),
          ),
      ],
      [
        'a transaction',
        () =>
          a.transaction().execute(async (trx) => {
            await trx.insertInto('keyed').values({ shard_key: '2' }).execute()
            await trx.insertInto('keyed').values({ shard_key: '45' }).execute()
          }),
      ],
    ]
    for (const [path, attempt] of attempts) {
      const error = await attempt().then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(error, path).toBeInstanceOf(WrongServerError)
      expect((error as WrongServerError).code, path).toBe('WRONG_SERVER')
      expect((error as Error).message, path).toMatch(/home is server "b"/)
    }
    expect(await keyedRows('a')).toEqual([])
    expect(await keyedRows('b')).toEqual([])
    // The same rows through the right Kysely, or the router, land at home.
    await sharded.forServer('b').insertInto('keyed').values({ shard_key: '40' }).execute()
    await sharded
      .insertInto('keyed')
      .values([{ shard_key: '1' }, { shard_key: '41' }])
      .execute()
    expect(await keyedRows('a')).toEqual(['1'])
    expect(await keyedRows('b')).toEqual(['40', '41'])
  })

  it('refuses an update or delete naming a row of another server by its ID', async () => {
    const [row] = await sharded
      .insertInto('keyed')
      .values({ shard_key: '50' })
      .returning('id')
      .execute()
    const a = sharded.forServer('a')
    await expect(
      a.updateTable('keyed').set({ shard_key: '50' }).where('id', '=', row!.id).execute(),
    ).rejects.toThrow(WrongServerError)
    await expect(a.deleteFrom('keyed').where('id', 'in', [row!.id]).execute()).rejects.toThrow(
      WrongServerError,
    )
    // Through b, its home, both run.
    const b = sharded.forId(row!.id)
    await b.updateTable('keyed').set({ shard_key: '50' }).where('id', '=', row!.id).execute()
    const deleted = await b.deleteFrom('keyed').where('id', '=', row!.id).executeTakeFirst()
    expect(deleted.numDeletedRows).toBe(1n)
  })

  it('returns the rows of a routed insert in the order of its values, one INSERT per server', async () => {
    await clearKeyed()
    const keys = ['33', '3', '60', '7', '63', '0']
    const before = { ...sent }
    const rows = await sharded
      .insertInto('keyed')
      .values(keys.map((key) => ({ shard_key: key })))
      .returning(['id', 'shard_key'])
      .execute()
    expect(rows.map((row) => row.shard_key)).toEqual(keys)
    for (const row of rows) expect(sharding.shardOfId(row.id)).toBe(Number(row.shard_key))
    expect({ a: sent.a! - before.a!, b: sent.b! - before.b! }).toEqual({ a: 1, b: 1 })
    expect(await keyedRows('a')).toEqual(['0', '3', '7'])
    expect(await keyedRows('b')).toEqual(['33', '60', '63'])
    // Without RETURNING: the counts of both servers, summed.
    const result = await sharded
      .insertInto('keyed')
      .values([{ shard_key: '4' }, { shard_key: '36' }, { shard_key: '37' }])
      .executeTakeFirstOrThrow()
    expect(result.numInsertedOrUpdatedRows).toBe(3n)
  })

  it('places a row by its own ID: a trusted ID of another shard than its key, and a key a later plugin changed', async () => {
    await clearKeyed()
    // Keys of shards 1 and 2 (server a), IDs of shards 40 and 41 (server b): the ID decides.
    const imported = source.nextId(40)
    await trustSuppliedIds(() =>
      sharded.insertInto('keyed').values({ id: imported, shard_key: '1' }).execute(),
    )
    await expect(
      trustSuppliedIds(() =>
        sharded
          .forServer('a')
          .insertInto('keyed')
          .values({ id: source.nextId(41), shard_key: '2' })
          .execute(),
      ),
    ).rejects.toThrow(WrongServerError)
    expect(await keyedRows('a')).toEqual([])
    expect(await keyedRows('b')).toEqual(['1'])
    // A plugin after shardedIds() gives the row another ID, of shard 40, after the plugin placed
    // it on shard 3 (server a): the router sends it where that ID lives.
    await clearKeyed()
    const moved = source.nextId(40)
    const ids = blogIds(source)
    const later = Object.fromEntries(
      ['a', 'b'].map((name) => [
        name,
        new Kysely<Database>({
          dialect: ids.dialect(blogDialect('postgres', raws[name]!.url)),
          plugins: [ids, rekey(moved)],
        }),
      ]),
    )
    const laterHomes = await ShardHomes.open({ sharding, servers: later, directory: map })
    try {
      const [row] = await shardedKysely(laterHomes)
        .insertInto('keyed')
        .values({ shard_key: '3' })
        .returning('id')
        .execute()
      expect(BigInt(row!.id)).toBe(moved)
      expect(await keyedRows('a')).toEqual([])
      expect(await keyedRows('b')).toEqual(['3'])
    } finally {
      await laterHomes.close()
      for (const db of Object.values(later)) await db.destroy()
    }
  })

  it('routes the pending IDs of an asynchronous source by their shard', async () => {
    await clearKeyed()
    const ids = shardedIds<Database>({
      source: asAsync(source),
      tables: { keyed: { shardBy: 'shard_key' } },
    })
    const asyncServers = Object.fromEntries(
      ['a', 'b'].map((name) => [
        name,
        new Kysely<Database>({
          dialect: ids.dialect(blogDialect('postgres', raws[name]!.url)),
          plugins: [ids],
        }),
      ]),
    )
    const asyncHomes = await ShardHomes.open({ sharding, servers: asyncServers, directory: map })
    try {
      const routed = shardedKysely(asyncHomes)
      const rows = await routed
        .insertInto('keyed')
        .values([{ shard_key: '5' }, { shard_key: '55' }])
        .returning(['id', 'shard_key'])
        .execute()
      expect(rows.map((row) => sharding.shardOfId(row.id))).toEqual([5, 55])
      expect(await keyedRows('a')).toEqual(['5'])
      expect(await keyedRows('b')).toEqual(['55'])
      await expect(
        routed.forServer('a').insertInto('keyed').values({ shard_key: '56' }).execute(),
      ).rejects.toThrow(WrongServerError)
      expect(await keyedRows('b')).toEqual(['55'])
    } finally {
      await asyncHomes.close()
      for (const db of Object.values(asyncServers)) await db.destroy()
    }
  })

  it('refuses what the router cannot place, before anything is written', async () => {
    const before = { ...sent }
    await expect(
      sharded.insertInto('plain').values({ id: '1', note: 'x' }).execute(),
    ).rejects.toThrow(ConfigurationError)
    await expect(
      sharded
        .insertInto('keyed')
        .columns(['id', 'shard_key'])
        .expression((eb) => eb.selectFrom('keyed').select(['id', 'shard_key']))
        .execute(),
    ).rejects.toThrow(InvalidArgumentError)
    await expect(
      sharded.insertInto('keyed').values({ id: sql<string>`1`, shard_key: '3' }).execute(),
    ).rejects.toThrow(InvalidArgumentError)
    await expect(sharded.insertInto('posts').values({ title: 'orphan' }).execute()).rejects.toThrow(
      MissingShardKeyError,
    )
    expect(sent).toEqual(before)
  })

  it('reads by ID, key and shard from the server holding it, and fans out by home', async () => {
    const author = await sharded
      .insertInto('authors')
      .values({ email: 'x@example.com' })
      .returning('id')
      .executeTakeFirstOrThrow()
    const shard = sharding.shardOfId(author.id)
    const home = map.targetFor(shard)
    const found = (db: Kysely<Database>) =>
      db.selectFrom('authors').select('email').where('id', '=', author.id).executeTakeFirst()
    expect(await found(sharded.forId(author.id))).toEqual({ email: 'x@example.com' })
    expect(await found(sharded.forKey('x@example.com'))).toEqual({ email: 'x@example.com' })
    expect(await found(sharded.forShard(shard))).toEqual({ email: 'x@example.com' })
    expect(await found(sharded.forServer(home === 'a' ? 'b' : 'a'))).toBeUndefined()
    const everywhere = await sharded.fanOut(
      (db, _server, shards) =>
        db.selectFrom('authors').select('id').where(sharded.inShards('id', shards)).execute(),
      { orderBy: (row) => row.id },
    )
    expect(everywhere.map((row) => row.id)).toContain(author.id)
    const none = await sharded
      .forServer(home)
      .selectFrom('authors')
      .select('id')
      .where(sharded.inShards('id', []))
      .execute()
    expect(none).toEqual([])
    const elsewhere = await sharded
      .forServer(home)
      .selectFrom('authors')
      .select('id')
      .where(sharded.inShards('id', [shard === 0 ? 1 : 0]))
      .execute()
    expect(elsewhere.map((row) => row.id)).not.toContain(author.id)
    expect(() => sharded.inShards('id', [64])).toThrow(ShardOutOfRangeError)
  })

  it('refuses a transaction target that names no server', async () => {
    const cases: [unknown, new (...args: never[]) => Error][] = [
      [undefined, InvalidArgumentError],
      [{}, InvalidArgumentError],
      [{ shard: 64 }, ShardOutOfRangeError],
      [{ key: null }, MissingShardKeyError],
    ]
    for (const [where, type] of cases) {
      expect(() => sharded.transaction(where as never)).toThrow(type)
    }
    await expect(sharded.transaction({ shard: 1 }).execute('no' as never)).rejects.toThrow(
      InvalidArgumentError,
    )
  })

  it('refuses ShardHomes whose Kysely instances have no plugin, or share one', async () => {
    const plain = new Kysely<Database>({ dialect: blogDialect('postgres', raws.a!.url) })
    const bare = await ShardHomes.open({
      sharding,
      servers: { a: plain, b: servers.b! },
      directory: map,
    })
    expect(() => shardedKysely(bare)).toThrow(ConfigurationError)
    await bare.close()
    await plain.destroy()
    const shared = await ShardHomes.open({
      sharding,
      servers: { a: servers.a!, b: servers.a! },
      directory: map,
    })
    expect(() => shardedKysely(shared)).toThrow(/same Kysely/)
    await shared.close()
    expect(() => shardedKysely({} as never)).toThrow(InvalidArgumentError)
  })
})
