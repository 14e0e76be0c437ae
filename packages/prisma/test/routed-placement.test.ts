/**
 * The router places a row once: each server's `shardedIds` hook and its home check take the
 * router's placement while the row still holds the ID and key it was placed by, and place it
 * again (refusing it) when an extension in between changed either. Three throwaway PostgreSQL
 * servers, checked with raw SQL on every server.
 */
import { PrismaPg } from '@prisma/adapter-pg'
import { blogSchemaSql, type HomeServers, startHomeServers } from '@shardflake/conformance'
import {
  InProcessSource,
  MisplacedIdError,
  ShardHomes,
  Sharding,
  WrongServerError,
} from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { PrismaClient } from '../generated/pg/client/client'
import { shardedIds } from '../generated/pg/shardflake'
import { type ShardedClients, shardedClients } from '../src'
import { closeHomes, homeOf, map, sharding } from './support/homes'

/** A key of shard 1 (server a) that an extension before `shardedIds` turns into '105' (shard 41, b). */
const REKEYED = '65'
/** A key of shard 7 (server a) whose row an extension after `shardedIds` gives an ID of shard 50 (c). */
const REIDED = '71'

type KeyedData = { id?: bigint | string | number | null; shardKey?: string | null }
type KeyedArgs = KeyedData | KeyedData[] | undefined
const rows = (data: KeyedArgs) => (Array.isArray(data) ? data : data ? [data] : [])

/**
 * A server's client: an extension that changes a shard key before `shardedIds` runs (as one
 * filling a tenant key would), `shardedIds`, and one that changes an ID after it.
 */
function serverClient(url: string, source: InProcessSource) {
  const rekey = (row: KeyedData) => {
    if (row.shardKey === REKEYED) row.shardKey = '105'
  }
  const reid = (row: KeyedData) => {
    if (row.shardKey === REIDED) row.id = String(source.nextId(50))
  }
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 2 }) })
    .$extends(onKeyedWrites(rekey))
    .$extends(shardedIds({ source }))
    .$extends(onKeyedWrites(reid))
}

/** A query extension that runs `change` on every row a `keyed` create or createMany writes. */
function onKeyedWrites(change: (row: KeyedData) => void) {
  const hook = <A extends { data?: KeyedArgs }, R>({
    args,
    query,
  }: {
    args: A
    query: (args: A) => R
  }) => {
    for (const row of rows(args.data)) change(row)
    return query(args)
  }
  return { query: { keyed: { create: hook, createMany: hook } } }
}
type ServerClient = ReturnType<typeof serverClient>

describe('shardedClients places a row once (Prisma, PostgreSQL)', () => {
  let servers: HomeServers
  let source: InProcessSource
  let homes: ShardHomes<ServerClient>
  let db: ShardedClients<ServerClient>

  beforeAll(async () => {
    servers = await startHomeServers('postgres')
    for (const server of servers.servers) {
      for (const sql of blogSchemaSql('postgres')) await server.query(sql)
    }
    source = new InProcessSource({ sharding, shards: 'all' })
    const clients = Object.fromEntries(
      servers.servers.map((server) => [server.name, serverClient(server.url, source)]),
    )
    homes = await ShardHomes.open({ sharding, servers: clients, directory: map })
    db = shardedClients({ homes })
  }, 120_000)

  afterAll(() => closeHomes(homes, source, servers))

  /** The first key `<tag>-<n>` whose shard lives on `server`. */
  const keyOn = (server: string, tag: string) => {
    for (let n = 0; ; n++) {
      if (homeOf(sharding.shardForKey(`${tag}-${n}`)) === server) return `${tag}-${n}`
    }
  }

  /** The shard keys on each server (raw SQL). */
  const keysOn = async (server: string) =>
    (await servers.server(server).query('SELECT shard_key FROM keyed')).map(
      (row) => row.shard_key as string,
    )

  it('hashes each key once and reads each ID once: the router, not the servers again', async () => {
    const resolve = vi.spyOn(Sharding.prototype, 'resolveShard')
    const shardOfId = vi.spyOn(Sharding.prototype, 'shardOfId')
    try {
      // Keys 2-61: 60 rows over the three servers, each server's rows not in ID order.
      const data = Array.from({ length: 60 }, (_, i) => ({ shardKey: String(61 - i) }))
      expect(await db.keyed.createMany({ data })).toEqual({ count: 60 })
      expect(resolve).toHaveBeenCalledTimes(60)
      expect(shardOfId).toHaveBeenCalledTimes(60)
      resolve.mockClear()
      shardOfId.mockClear()
      const one = await db.keyed.create({ data: { shardKey: '62' } })
      expect(resolve).toHaveBeenCalledTimes(1)
      expect(shardOfId).toHaveBeenCalledTimes(1)
      expect(sharding.shardOfId(one.id)).toBe(62)
    } finally {
      resolve.mockRestore()
      shardOfId.mockRestore()
    }
    expect(await servers.misplaced({ table: 'keyed', sharding, homeOf })).toEqual([])
    const counts = await Promise.all(['a', 'b', 'c'].map(async (s) => (await keysOn(s)).length))
    expect(counts).toEqual([19, 21, 21])
  })

  it('checks again a row whose key an extension changed after the router placed it', async () => {
    // Placed on shard 1 (server a) by its key; server a's extension makes the key '105'.
    const data = [{ shardKey: '3' }, { shardKey: REKEYED }, { shardKey: '5' }]
    await expect(db.keyed.createMany({ data })).rejects.toThrow(MisplacedIdError)
    await expect(db.keyed.create({ data: { shardKey: REKEYED } })).rejects.toThrow(MisplacedIdError)
    for (const server of ['a', 'b', 'c']) expect(await keysOn(server)).not.toContain('105')
  })

  it('checks the home of an ID an extension changed after shardedIds', async () => {
    // Placed on shard 7 (server a); server a's extension after shardedIds gives the row an ID of
    // shard 50, whose home is c.
    const data = [{ shardKey: '3' }, { shardKey: REIDED }, { shardKey: '5' }]
    await expect(db.keyed.createMany({ data })).rejects.toThrow(WrongServerError)
    await expect(db.keyed.create({ data: { shardKey: REIDED } })).rejects.toThrow(WrongServerError)
    expect(await servers.misplaced({ table: 'keyed', sharding, homeOf })).toEqual([])
    for (const server of ['a', 'b', 'c']) expect(await keysOn(server)).not.toContain(REIDED)
  })

  it('skips the home check only on clients whose last query hook is shardedIds', async () => {
    const checkHome = vi.spyOn(ShardHomes.prototype, 'checkHome')
    const plain = Object.fromEntries(
      servers.servers.map((server) => [
        server.name,
        new PrismaClient({
          adapter: new PrismaPg({ connectionString: server.url, max: 2 }),
        }).$extends(shardedIds({ source })),
      ]),
    )
    const plainHomes = await ShardHomes.open({ sharding, servers: plain, directory: map })
    try {
      const data = Array.from({ length: 30 }, (_, i) => ({ shardKey: `skip-${i}` }))
      // An extension after shardedIds may change a row: its servers check every home again.
      expect(await db.keyed.createMany({ data: data.slice(0, 10) })).toEqual({ count: 10 })
      expect(checkHome).toHaveBeenCalled()
      checkHome.mockClear()
      // Nothing after shardedIds: the router's own placement is the check.
      const routed = shardedClients({ homes: plainHomes })
      expect(await routed.keyed.createMany({ data: data.slice(10, 29) })).toEqual({ count: 19 })
      const one = await routed.keyed.create({ data: data[29]! })
      // One row per call, for each server: its own client, no check behind it.
      for (const server of ['a', 'b', 'c']) {
        const shardKey = keyOn(server, 'one')
        expect(await routed.keyed.createMany({ data: [{ shardKey }] })).toEqual({ count: 1 })
        const returned = keyOn(server, 'returned')
        const [made] = await routed.keyed.createManyAndReturn({ data: [{ shardKey: returned }] })
        expect(sharding.shardOfId(made!.id)).toBe(sharding.shardForKey(returned))
      }
      expect(checkHome).not.toHaveBeenCalled()
      expect(sharding.shardOfId(one.id)).toBe(sharding.shardForKey('skip-29'))
    } finally {
      checkHome.mockRestore()
      await plainHomes.close()
      for (const client of Object.values(plain)) await client.$disconnect()
    }
    expect(await servers.misplaced({ table: 'keyed', sharding, homeOf })).toEqual([])
    const stored = (await Promise.all(['a', 'b', 'c'].map(keysOn))).flat()
    expect(stored.filter((key) => key.startsWith('skip-')).sort()).toEqual(
      Array.from({ length: 30 }, (_, i) => `skip-${i}`).sort(),
    )
    for (const server of ['a', 'b', 'c']) {
      const ones = (await keysOn(server)).filter((key) => /^(one|returned)-/.test(key))
      expect(ones.sort()).toEqual([keyOn(server, 'one'), keyOn(server, 'returned')])
    }
  })
})
