import {
  ConfigurationError,
  defineLayout,
  defineSharding,
  instagram,
  ShardingMismatchError,
} from '@shardflake/core'
import { beforeAll, describe, expect, it } from 'vitest'
import { fakeClock, perTick, sharding, testFixture } from './helpers'
import { runTag, sharedRedisUrl } from './redis-servers'

const prefix = `sf:redis:servers:${runTag}:`
let urls: string[] = []
const fixture = testFixture(() => ({ sharding, servers: urls, keyPrefix: prefix }))
fixture.deleteAfter(() => sharedRedisUrl, prefix)
const open = fixture.source

beforeAll(async () => {
  const throwaway = await Promise.all([fixture.server(), fixture.server()])
  urls = [sharedRedisUrl, ...throwaway.map((server) => server.url)]
})

describe('RedisSource on three independent servers (offsets 0, 1, 2, step 3)', () => {
  it('never repeats an ID across 6 processes x 8 callers, each process picking servers in turn', async () => {
    const processes = Array.from({ length: 6 }, () => open({ strategy: 'round-robin' }))
    const callers = processes.flatMap((source, p) =>
      Array.from({ length: 8 }, async (_, c) => {
        const ids: bigint[] = []
        const shard = (p + c) % 2 === 0 ? 11 : 12
        while (ids.length < 3_000) {
          if (c % 3 === 0) ids.push(await source.nextId(shard))
          else ids.push(...(await source.nextIds(shard, 250)))
        }
        return ids
      }),
    )
    const all = (await Promise.all(callers)).flat()
    expect(all).toHaveLength(6 * 8 * 3_000)
    expect(new Set(all).size).toBe(all.length)
  })

  it('never repeats when every process sees a different server clock (skew up to 30 ms)', async () => {
    // Each process's calls see the real time plus its own skew. Processes whose clock is behind
    // wait while the others keep the state ahead (allowed to wait long here): never repeat.
    const processes = [-30, -12, 0, 5, 18, 30].map((skew) =>
      open({ strategy: 'round-robin', clock: () => Date.now() + skew, maxWaitMs: 30_000 }),
    )
    const rounds = await Promise.all(
      processes.flatMap((source) =>
        Array.from({ length: 4 }, async () => {
          const ids: bigint[] = []
          for (let i = 0; i < 10; i++) ids.push(...(await source.nextIds(13, 200)))
          return ids
        }),
      ),
    )
    const all = rounds.flat()
    expect(new Set(all).size).toBe(6 * 4 * 10 * 200)
  })

  it('tells which server issued each ID, and each server keeps to its residue and its third of a ms', async () => {
    const clock = fakeClock(Date.now() + 600_000)
    const source = open({ strategy: 'round-robin', clock: clock.read, sleep: clock.sleep })
    const served = []
    for (let i = 0; i < 9; i++) served.push(await source.nextIdsWithServer(14, 1_000))
    const byServer = new Map<string, bigint[]>()
    for (const { ids, servers } of served) {
      expect(ids).toHaveLength(servers.length)
      ids.forEach((id, i) => {
        const name = servers[i]!
        expect(source.serverNames[source.serverOf(id)]).toBe(name)
        byServer.set(name, [...(byServer.get(name) ?? []), id])
      })
    }
    expect([...byServer.keys()].sort()).toEqual([...source.serverNames].sort())
    for (const ids of byServer.values()) {
      for (const count of perTick(instagram, ids).values()) expect(count).toBeLessThanOrEqual(342)
    }
    const all = served.flatMap(({ ids }) => ids)
    expect(new Set(all).size).toBe(9_000)
    const single = await source.nextIdWithServer(14)
    expect(source.serverNames).toContain(single.server)
    expect(source.serverNames[source.serverOf(single.id)]).toBe(single.server)
  })

  it('puts the server index in the worker field of a layout with worker bits', async () => {
    const layout = defineLayout({
      name: 'with-workers',
      epoch: instagram.epoch,
      timeBits: 41,
      shardBits: 11,
      workerBits: 2,
      sequenceBits: 10,
    })
    const source = open({
      sharding: defineSharding({ layout, logicalShards: 2000 }),
      keyPrefix: `${prefix}workers:`,
      strategy: 'round-robin',
    })
    const ids: bigint[] = []
    const servers: string[] = []
    for (let i = 0; i < 6; i++) {
      const served = await source.nextIdsWithServer(15, 2_000)
      ids.push(...served.ids)
      servers.push(...served.servers)
    }
    expect(new Set(ids).size).toBe(12_000)
    ids.forEach((id, i) => {
      expect(source.serverNames[layout.decompose(id).worker]).toBe(servers[i])
    })
  })

  it('refuses to share a prefix with another server order, drift, layout or logicalShards', async () => {
    await open().nextId(16)
    const reordered = open({ servers: [urls[1]!, urls[0]!, urls[2]!] })
    await expect(reordered.nextId(16)).rejects.toBeInstanceOf(ConfigurationError)
    const otherDrift = open({ maxDriftMs: 50 })
    await expect(otherDrift.nextId(16)).rejects.toMatchObject({ code: 'CONFIGURATION' })
    const otherEpoch = open({
      sharding: defineSharding({
        layout: defineLayout({
          epoch: '2020-01-01',
          timeBits: 41,
          shardBits: 13,
          sequenceBits: 10,
        }),
        logicalShards: 2000,
      }),
    })
    await expect(otherEpoch.nextId(16)).rejects.toBeInstanceOf(ShardingMismatchError)
    const otherCount = open({
      sharding: defineSharding({ layout: instagram, logicalShards: 1024 }),
    })
    const error = await otherCount.nextId(16).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(ShardingMismatchError)
    expect((error as ShardingMismatchError).message).toContain('logicalShards 2000')
  })
})
