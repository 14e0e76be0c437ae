/**
 * `shardedDatabases()` beyond the routed suite: the home check on every path of a routed database
 * (rows carrying their ID, rows whose ID `$defaultFn` makes, outside transactions), routing again
 * with new homes, and the refusals of bad setups. Two databases of the test server stand for two
 * servers (the routing does not care). Shared by both Drizzle versions.
 */
import {
  blogSchemaSql,
  type Dialect,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource, ShardHomes, ShardMap, type WriteGroup } from '@shardflake/core'
import { type Column, desc, eq, type Logger } from 'drizzle-orm'
import { bigint as mysqlBigint, mysqlTable, varchar } from 'drizzle-orm/mysql-core'
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2'
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres'
import { bigint as pgBigint, pgTable, text } from 'drizzle-orm/pg-core'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type ShardedDatabases,
  type ShardedIds,
  shardedDatabases,
  shardedId,
  shardedIds,
} from '../../src'
import { blogTables } from './blog'

type Row = Record<string, unknown>

/** The builder calls the tests make, typed loosely (the dialect is chosen at run time). */
interface LooseDb {
  insert(table: unknown): {
    values(rows: Row | Row[]): PromiseLike<unknown> & {
      returning(): PromiseLike<Row[]>
      $returningId(): PromiseLike<Row[]>
    }
  }
  select(): {
    from(table: unknown): {
      where(
        condition: unknown,
      ): PromiseLike<Row[]> & { orderBy(order: unknown): PromiseLike<Row[]> }
    }
  }
  transaction<R>(run: (tx: LooseDb) => Promise<R>): Promise<R>
}

class CountingLogger implements Logger {
  count = 0
  logQuery(): void {
    this.count++
  }
}

const sharding = testSharding()
/** Shards 0-31 on a, 32-63 on b. */
const map = new ShardMap(sharding, [
  { from: 0, to: 31, target: 'a' },
  { from: 32, to: 63, target: 'b' },
])
/** The same servers, the other way round (a move of every shard). */
const swapped = new ShardMap(sharding, [
  { from: 0, to: 31, target: 'b' },
  { from: 32, to: 63, target: 'a' },
])
const shardOf = (id: unknown) => sharding.shardOfId(id as bigint)

/** Runs `run` and returns the code of the typed error it threw (`'ok'` when it did not). */
async function codeOf(run: () => unknown): Promise<string> {
  try {
    await run()
    return 'ok'
  } catch (error) {
    const code = (error as { code?: unknown }).code
    if (typeof code === 'string') return code
    throw error
  }
}

/** The tests of `shardedDatabases()` on one dialect; `tag` keeps the versions' databases apart. */
export function describeShardedDatabases(tag: string, dialect: Dialect): void {
  const database = dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'
  describe(`shardedDatabases() on Drizzle ${tag} / ${database}`, () => {
    const tables = blogTables(dialect)
    const { keyed, posts } = tables
    /** The shard the `pinned` table's rows get from `$defaultFn` (a scope, in an application). */
    let pinnedShard: number | undefined
    const pinnedRule = { shard: () => pinnedShard }
    const pinned =
      dialect === 'postgres'
        ? pgTable('pinned', {
            id: shardedId(pgBigint({ mode: 'bigint' }), pinnedRule).primaryKey(),
            note: text().notNull(),
          })
        : mysqlTable('pinned', {
            id: shardedId(mysqlBigint({ mode: 'bigint' }), pinnedRule).primaryKey(),
            note: varchar({ length: 200 }).notNull(),
          })
    const plain =
      dialect === 'postgres'
        ? pgTable('plain', { id: pgBigint({ mode: 'bigint' }).primaryKey() })
        : mysqlTable('plain', { id: mysqlBigint({ mode: 'bigint' }).primaryKey() })
    const raws: Record<string, RawDatabase> = {}
    const dbs: Record<string, object> = {}
    const loggers: Record<string, CountingLogger> = {}
    const closers: (() => Promise<void>)[] = []
    let ids: ShardedIds
    let homes: ShardHomes<object>
    let sharded: ShardedDatabases<object>
    const loose = (db: object) => db as unknown as LooseDb
    const keyedId = (keyed as unknown as { id: Column }).id
    /** `sharded.insert` and `ids.assign`, typed loosely like the tables. */
    const insertMany = (rows: Row[]) => sharded.insert(keyed, rows as never[]) as Promise<Row[]>
    const insertOne = (row: Row) => sharded.insert(keyed, row as never) as unknown as Promise<Row>
    const assignOne = (row: Row) => ids.assign(keyed, row as never) as unknown as Promise<Row>
    const assignMany = (rows: Row[]) => ids.assign(keyed, rows as never[]) as Promise<Row[]>
    const count = async (server: string, table: string) => {
      const rows = await raws[server]!.query(`SELECT count(*) AS n FROM ${table}`)
      return Number(rows[0]!.n)
    }
    const idsOn = async (server: string, table: string) =>
      (
        await raws[server]!.query(
          `SELECT ${dialect === 'postgres' ? 'id::text' : 'CAST(id AS CHAR)'} AS id FROM ${table}`,
        )
      ).map((row) => row.id as string)

    beforeAll(async () => {
      const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
      for (const server of ['a', 'b']) {
        const raw = await freshDatabase(
          dialect,
          `sf_drz_sd_${tag}_${dialect.slice(0, 2)}_${server}`,
        )
        raws[server] = raw
        closers.push(() => raw.close())
        for (const statement of [
          ...blogSchemaSql(dialect),
          `CREATE TABLE pinned (id BIGINT NOT NULL PRIMARY KEY, note ${text} NOT NULL)`,
          'CREATE TABLE plain (id BIGINT NOT NULL PRIMARY KEY)',
        ]) {
          await raw.query(statement)
        }
        const logger = new CountingLogger()
        loggers[server] = logger
        if (dialect === 'postgres') {
          const pool = new pg.Pool({ connectionString: raw.url, max: 2 })
          pool.on('error', () => undefined)
          dbs[server] = pgDrizzle({ client: pool, logger })
          closers.unshift(() => pool.end())
        } else {
          const pool = mysql.createPool({
            uri: raw.url,
            connectionLimit: 2,
            supportBigNumbers: true,
            bigNumberStrings: true,
          })
          dbs[server] = mysqlDrizzle({ client: pool, logger })
          closers.unshift(() => pool.end())
        }
      }
      const source = new InProcessSource({ sharding, shards: 'all' })
      closers.push(async () => source.close())
      ids = shardedIds(dbs.a!, { source, schema: { ...tables, pinned } })
      homes = await ShardHomes.open({ sharding, servers: dbs, directory: map })
      sharded = shardedDatabases(homes, ids)
    }, 60_000)

    afterAll(async () => {
      ids?.close()
      await homes?.close()
      for (const close of closers) await close()
    })

    it('inserts rows of several servers with one INSERT per server, and returns them in order', async () => {
      const before = { a: loggers.a!.count, b: loggers.b!.count }
      const keys = ['3', '40', '7', '63', '31', '32']
      const rows = await insertMany(keys.map((shardKey) => ({ shardKey })))
      expect(rows.map((row) => row.shardKey)).toEqual(keys)
      expect(rows.map((row) => shardOf(row.id))).toEqual(keys.map(Number))
      expect({ a: loggers.a!.count - before.a, b: loggers.b!.count - before.b }).toEqual({
        a: 1,
        b: 1,
      })
      const onA = await idsOn('a', 'keyed')
      const onB = await idsOn('b', 'keyed')
      for (const row of rows) {
        expect(shardOf(row.id) < 32 ? onA : onB).toContain(String(row.id))
        expect(shardOf(row.id) < 32 ? onB : onA).not.toContain(String(row.id))
      }
      expect(await insertMany([])).toEqual([])
      // Rows of one server: your array goes through as it is, with nothing added to it.
      const mine = ['3', '4', '5'].map((shardKey) => ({ shardKey }))
      expect(await insertMany(mine)).toBe(mine)
      expect(Reflect.ownKeys(mine)).toEqual(['0', '1', '2', 'length'])
    })

    it('reads by ID, key and shard from the server holding it', async () => {
      const row = await insertOne({ shardKey: '50' })
      expect(sharded.forId(row.id as bigint)).toBe(dbs.b)
      expect(sharded.forKey(50)).toBe(dbs.b)
      expect(sharded.forShard(10)).toBe(dbs.a)
      const found = await loose(sharded.forId(row.id as bigint))
        .select()
        .from(keyed)
        .where(eq(keyedId, row.id))
      expect(found.map((r) => r.shardKey)).toEqual(['50'])
    })

    it('refuses, outside a transaction too, a row written through a server that is not its home, and writes nothing', async () => {
      const row = await assignOne({ shardKey: '5' })
      const before = await count('b', 'keyed')
      expect(await codeOf(() => loose(dbs.b!).insert(keyed).values(row))).toBe('WRONG_SERVER')
      // One foreign row among rows of the server's own refuses the whole statement.
      const mixed = await assignMany([{ shardKey: '40' }, { shardKey: '6' }])
      expect(await codeOf(() => loose(dbs.b!).insert(keyed).values(mixed))).toBe('WRONG_SERVER')
      expect(await count('b', 'keyed')).toBe(before)
      await loose(dbs.a!).insert(keyed).values(row)
      expect(await idsOn('a', 'keyed')).toContain(String(row.id))
    })

    it('checks the IDs $defaultFn makes: a row through a server that is not its home is refused, through its home written with the ID Drizzle reports', async () => {
      pinnedShard = 45
      const before = await count('a', 'pinned')
      expect(await codeOf(() => loose(dbs.a!).insert(pinned).values({ note: 'lost' }))).toBe(
        'WRONG_SERVER',
      )
      expect(await count('a', 'pinned')).toBe(before)
      const reported =
        dialect === 'postgres'
          ? await loose(dbs.b!).insert(pinned).values({ note: 'home' }).returning()
          : await loose(dbs.b!).insert(pinned).values({ note: 'home' }).$returningId()
      expect(reported).toHaveLength(1)
      const id = reported[0]!.id as bigint
      expect(typeof id).toBe('bigint')
      expect(shardOf(id)).toBe(45)
      expect(await idsOn('b', 'pinned')).toEqual([String(id)])
      pinnedShard = undefined
    })

    it('refuses a row of another server inside a transaction, rolling back what it wrote', async () => {
      const home = await assignOne({ shardKey: '12' })
      const foreign = await assignOne({ shardKey: '44' })
      const code = await codeOf(() =>
        sharded.transaction({ key: 12 }, async (tx) => {
          await loose(tx).insert(keyed).values(home)
          await loose(tx).insert(keyed).values(foreign)
        }),
      )
      expect(code).toBe('WRONG_SERVER')
      expect(await idsOn('a', 'keyed')).not.toContain(String(home.id))
      expect(await idsOn('b', 'keyed')).not.toContain(String(foreign.id))
    })

    /**
     * Runs `run` while the router's `homes.writeGroups` answers with what `regroup` makes of its
     * answer (called once it has answered), then restores it.
     */
    async function whileGrouping<R>(
      regroup: <T>(
        groups: Map<string, WriteGroup<object, T>>,
        items: readonly T[],
      ) => Map<string, WriteGroup<object, T>>,
      run: () => Promise<R>,
    ): Promise<R> {
      const writeGroups = homes.writeGroups.bind(homes)
      homes.writeGroups = async <T>(
        items: readonly T[],
        shardOf: (item: T) => number,
        signal?: AbortSignal,
      ) => regroup(await writeGroups(items, shardOf, signal), items)
      try {
        return await run()
      } finally {
        Reflect.deleteProperty(homes, 'writeGroups')
      }
    }

    it('checks a routed row by the ID it carries when that changed after the router placed it', async () => {
      const foreign = await assignOne({ shardKey: '40' })
      let placed = false
      let id: unknown
      const changing: Row = { shardKey: '5' }
      Object.defineProperty(changing, 'id', {
        enumerable: true,
        get: () => (placed ? foreign.id : id),
        set: (value: unknown) => {
          id = value
        },
      })
      const before = { a: await count('a', 'keyed'), b: await count('b', 'keyed') }
      const code = await codeOf(() =>
        whileGrouping(
          (groups) => {
            placed = true
            return groups
          },
          () => insertMany([{ shardKey: '3' }, changing]),
        ),
      )
      expect(code).toBe('WRONG_SERVER')
      expect({ a: await count('a', 'keyed'), b: await count('b', 'keyed') }).toEqual(before)
    })

    it('refuses routed rows handed to a server that is not their home (a wrong grouping), and writes nothing', async () => {
      const before = { a: await count('a', 'keyed'), b: await count('b', 'keyed') }
      const code = await codeOf(() =>
        whileGrouping(
          (_groups, items) => new Map([['a', { handle: dbs.a!, items: [...items] }]]),
          () => insertMany([{ shardKey: '3' }, { shardKey: '40' }, { shardKey: '4' }]),
        ),
      )
      expect(code).toBe('WRONG_SERVER')
      expect({ a: await count('a', 'keyed'), b: await count('b', 'keyed') }).toEqual(before)
    })

    it('routes the same databases by new homes once routed again', async () => {
      await homes.close()
      const moved = await ShardHomes.open({ sharding, servers: dbs, directory: swapped })
      try {
        const again = shardedDatabases(moved, ids)
        const row = (await again.insert(keyed, { shardKey: '2' } as never)) as unknown as Row
        expect(await idsOn('b', 'keyed')).toContain(String(row.id))
        const other = await assignOne({ shardKey: '3' })
        expect(await codeOf(() => loose(dbs.a!).insert(keyed).values(other))).toBe('WRONG_SERVER')
      } finally {
        await moved.close()
        homes = await ShardHomes.open({ sharding, servers: dbs, directory: map })
        sharded = shardedDatabases(homes, ids)
      }
    })

    it('merges a fan-out by ID, each server asked only about its own shards', async () => {
      const rows = await insertMany(['1', '33', '2', '34'].map((shardKey) => ({ shardKey })))
      const newest = await sharded.fanOut(
        async (db, _server, shards) =>
          (await loose(db)
            .select()
            .from(keyed)
            .where(sharded.inShards(keyedId, shards))
            .orderBy(desc(keyedId))) as Row[],
        { orderBy: (row) => row.id as bigint, order: 'desc', limit: 2 },
      )
      const all = [...(await idsOn('a', 'keyed')), ...(await idsOn('b', 'keyed'))]
        .map(BigInt)
        .sort((x, y) => (x > y ? -1 : 1))
      expect(newest.map((row) => row.id)).toEqual(all.slice(0, 2))
      expect(all).toContain(rows[3]!.id)
      const none = await loose(dbs.a!).select().from(keyed).where(sharded.inShards(keyedId, []))
      expect(none).toEqual([])
    })

    it('refuses bad input with typed errors', async () => {
      expect(await codeOf(() => shardedDatabases({} as never, ids))).toBe('INVALID_ARGUMENT')
      expect(await codeOf(() => shardedDatabases(homes, {} as never))).toBe('INVALID_ARGUMENT')
      expect(await codeOf(() => sharded.insert(plain, { id: 1n }))).toBe('CONFIGURATION')
      expect(await codeOf(() => sharded.transaction({} as never, async () => 1))).toBe(
        'INVALID_ARGUMENT',
      )
      expect(await codeOf(() => sharded.transaction({ shard: 64 }, async () => 1))).toBe(
        'SHARD_OUT_OF_RANGE',
      )
      expect(await codeOf(() => sharded.inShards(keyedId, [64]))).toBe('SHARD_OUT_OF_RANGE')
      expect(await codeOf(() => sharded.insert(posts, { title: 'no author' } as never))).toBe(
        'MISSING_SHARD_KEY',
      )
      const twice = await ShardHomes.open({
        sharding,
        servers: { a: dbs.a!, b: dbs.a! },
        directory: map,
      })
      expect(await codeOf(() => shardedDatabases(twice, ids))).toBe('CONFIGURATION')
      await twice.close()
      const notDrizzle = await ShardHomes.open({
        sharding,
        servers: { a: dbs.a!, b: { query() {} } },
        directory: map,
      })
      expect(await codeOf(() => shardedDatabases(notDrizzle, ids))).toBe('CONFIGURATION')
      await notDrizzle.close()
    })
  })
}
