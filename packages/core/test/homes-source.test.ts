import { afterEach, describe, expect, it } from 'vitest'
import {
  ConfigurationError,
  defineSharding,
  HomesSource,
  type IdSource,
  InvalidArgumentError,
  instagram,
  ShardHomes,
  ShardingMismatchError,
  ShardMovedError,
} from '../src'
import { MemoryDirectory } from './memory-directory'

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })

/** A source standing for one server's `next_id()`: records its draws, refuses fenced shards. */
function serverSource(name: string, draws: string[], fenced = new Set<number>()) {
  let sequence = 0
  const draw = (shard: number) => {
    if (fenced.has(shard)) throw new ShardMovedError(shard, `shard ${shard} moved from ${name}`)
    draws.push(`${name}:${shard}`)
    return instagram.compose({ timestamp: Date.now(), shard, sequence: sequence++ % 1024 })
  }
  return {
    fenced,
    source: {
      sharding,
      synchronous: false,
      nextId: async (shard: number) => draw(shard),
      nextIds: async (shard: number, count: number) =>
        Array.from({ length: count }, () => draw(shard)),
      close: () => undefined,
    } satisfies IdSource,
  }
}

const opened: ShardHomes<unknown>[] = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((homes) => homes.close()))
})

async function setup() {
  const directory = new MemoryDirectory(
    sharding,
    [
      { from: 0, to: 31, server: 'a', state: 'serving' },
      { from: 32, to: 63, server: 'b', state: 'serving' },
    ],
    200,
  )
  const homes = await ShardHomes.open({
    sharding,
    servers: { a: 'a', b: 'b' },
    directory,
    refreshMs: 20,
    switchWaitMs: 100,
  })
  opened.push(homes)
  const draws: string[] = []
  const a = serverSource('a', draws)
  const b = serverSource('b', draws)
  const source = new HomesSource({ homes, sources: { a: a.source, b: b.source } })
  return { directory, homes, draws, a, b, source }
}

describe('HomesSource', () => {
  it("draws each shard's IDs on its home, and follows the shard when it moves", async () => {
    const { directory, homes, draws, source } = await setup()
    expect(sharding.shardOfId(await source.nextId(3))).toBe(3)
    expect(await source.nextIds(40, 2)).toHaveLength(2)
    expect(draws).toEqual(['a:3', 'b:40', 'b:40'])
    await directory.set(0, { server: 'b' })
    await homes.refresh()
    await source.nextId(3)
    expect(draws.at(-1)).toBe('b:3')
  })

  it('routes a draw that met the old home’s fence again, once the directory says where', async () => {
    const { directory, draws, a, source } = await setup()
    await source.nextId(5)
    // The shard moved and the old home is fenced; this process has not read the directory yet.
    await directory.set(0, { server: 'b' })
    for (let shard = 0; shard <= 31; shard++) a.fenced.add(shard)
    expect(sharding.shardOfId(await source.nextId(5))).toBe(5)
    expect(draws).toEqual(['a:5', 'b:5'])
  })

  it('passes the fence on when the directory still says the old home', async () => {
    const { a, source } = await setup()
    a.fenced.add(7)
    await expect(source.nextId(7)).rejects.toBeInstanceOf(ShardMovedError)
  })

  it('refuses sources that do not cover the homes, typed', async () => {
    const { homes, a, b } = await setup()
    expect(() => new HomesSource({ homes, sources: { a: a.source } })).toThrow(ConfigurationError)
    expect(() => new HomesSource({ homes, sources: { a: a.source } })).toThrow(/server "b"/)
    const ticket = { ...b.source, sharding: undefined }
    expect(() => new HomesSource({ homes, sources: { a: a.source, b: ticket } })).toThrow(
      /without a layout/,
    )
    const other = {
      ...b.source,
      sharding: defineSharding({ layout: instagram, logicalShards: 65 }),
    }
    expect(() => new HomesSource({ homes, sources: { a: a.source, b: other } })).toThrow(
      ShardingMismatchError,
    )
    expect(() => new HomesSource({ homes: {} as never, sources: {} })).toThrow(InvalidArgumentError)
    expect(
      () => new HomesSource({ homes, sources: { a: a.source, b: b.source }, extra: 1 } as never),
    ).toThrow(InvalidArgumentError)
    expect(() => new HomesSource({ homes, sources: null as never })).toThrow(InvalidArgumentError)
  })
})
