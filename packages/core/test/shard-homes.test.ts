import fc from 'fast-check'
import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  CancelledError,
  ConfigurationError,
  checkDirectoryEntries,
  DirectoryChangedError,
  DirectoryStaleError,
  defineSharding,
  InvalidArgumentError,
  instagram,
  ShardHomes,
  ShardingMismatchError,
  ShardMap,
  ShardMovingError,
  ShardOutOfRangeError,
  StaticDirectory,
  WrongServerError,
} from '../src'
import { MemoryDirectory, sleep } from './memory-directory'

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const servers = { a: 'handle-a', b: 'handle-b', c: 'handle-c' }
const idOn = (shard: number) => instagram.compose({ timestamp: Date.now(), shard, sequence: 1 })

const opened: ShardHomes<unknown>[] = []
async function open<H>(options: Parameters<typeof ShardHomes.open<H>>[0]): Promise<ShardHomes<H>> {
  const homes = await ShardHomes.open(options)
  opened.push(homes)
  return homes
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((homes) => homes.close()))
})

const twoServers = () =>
  new MemoryDirectory(sharding, [
    { from: 0, to: 31, server: 'a', state: 'serving' },
    { from: 32, to: 63, server: 'b', state: 'serving' },
  ])

describe('ShardHomes over a static map', () => {
  const map = new ShardMap(sharding, [
    { from: 0, to: 15, target: 'a' },
    { from: 16, to: 47, target: 'b' },
    { from: 50, to: 63, target: 'c' },
  ])

  it('routes by shard, ID and key to one server', async () => {
    const homes = await open({ sharding, servers, directory: map })
    expect(homes.serverOf(0)).toBe('a')
    expect(homes.serverOf(16)).toBe('b')
    expect(homes.forShard(63)).toBe('handle-c')
    expect(homes.forId(idOn(20))).toBe('handle-b')
    expect(homes.forId(idOn(20).toString())).toBe('handle-b')
    expect(homes.forKey(31341n)).toBe('handle-b') // 31341 % 64 = 45
    expect(homes.snapshot.version).toBe(1n)
    expect(homes.snapshot.maxStaleMs).toBe(Number.POSITIVE_INFINITY)
    expect(await homes.writeHome(5)).toEqual({ server: 'a', handle: 'handle-a' })
    expect(homes.writeHomeNow(20)).toEqual({ server: 'b', handle: 'handle-b' })
    expect(homes.serverNames).toEqual(['a', 'b', 'c'])
  })

  it('refuses shards without a home, outside the logical shards, and any change', async () => {
    const homes = await open({ sharding, servers, directory: map })
    expect(() => homes.serverOf(48)).toThrow(ShardOutOfRangeError)
    expect(() => homes.serverOf(48)).toThrow(/no home.*0-47,50-63/)
    expect(() => homes.serverOf(64)).toThrow(ShardOutOfRangeError)
    await expect(homes.writeHome(49)).rejects.toBeInstanceOf(ShardOutOfRangeError)
    expect(() => homes.writeHomeNow(49)).toThrow(ShardOutOfRangeError)
    expect(() => homes.writeHomeNow(64)).toThrow(ShardOutOfRangeError)
    await expect(homes.directory.compareAndSet(1n, [])).rejects.toBeInstanceOf(ConfigurationError)
  })

  it('splits items by server, in their order', async () => {
    const homes = await open({ sharding, servers, directory: map })
    const items = [1, 20, 2, 60, 21].map((shard) => ({ shard }))
    const groups = homes.groupByServer(items, (item) => item.shard)
    expect([...groups.keys()]).toEqual(['a', 'b', 'c'])
    expect(groups.get('a')!.map((item) => item.shard)).toEqual([1, 2])
    expect(groups.get('b')!.map((item) => item.shard)).toEqual([20, 21])
    const writes = await homes.writeGroups(items, (item) => item.shard)
    expect(writes.get('c')).toEqual({ handle: 'handle-c', items: [{ shard: 60 }] })
    expect(() => homes.groupByServer(items, () => 48)).toThrow(ShardOutOfRangeError)
  })

  it('groups a write as it groups a read: the same servers, in the same order, items in theirs (property)', async () => {
    const homes = await open({ sharding, servers, directory: map })
    const served = fc.oneof(fc.integer({ min: 0, max: 47 }), fc.integer({ min: 50, max: 63 }))
    await fc.assert(
      fc.asyncProperty(fc.array(served, { maxLength: 60 }), async (shards) => {
        const items = shards.map((shard, index) => ({ shard, index }))
        const reads = homes.groupByServer(items, (item) => item.shard)
        const writes = await homes.writeGroups(items, (item) => item.shard)
        expect([...writes.keys()]).toEqual([...reads.keys()])
        for (const [server, group] of writes) {
          expect(group).toEqual({ handle: `handle-${server}`, items: reads.get(server) })
        }
      }),
      { numRuns: 300 },
    )
  })

  it('guards a write through the wrong server', async () => {
    const homes = await open({ sharding, servers, directory: map })
    expect(() => homes.checkHome('a', 3)).not.toThrow()
    expect(() => homes.checkHome('b', 3)).toThrow(WrongServerError)
    const error = (() => {
      try {
        homes.checkHome('b', 3)
      } catch (caught) {
        return caught as WrongServerError
      }
    })()
    expect(error?.retryable).toBe(false)
    expect(error?.message).toMatch(/shard 3 .* server "b", but its home is server "a"/)
  })

  it('refuses a map or directory naming a server it has no handle for, or of another sharding', async () => {
    await expect(
      ShardHomes.open({ sharding, servers: { a: 1, b: 2 }, directory: map }),
    ).rejects.toThrow(/server "c", which is not among this process's servers \(a, b\)/)
    const other = defineSharding({ layout: instagram, logicalShards: 65 })
    await expect(
      ShardHomes.open({ sharding: other, servers, directory: map }),
    ).rejects.toBeInstanceOf(ShardingMismatchError)
    const directory = new MemoryDirectory(other, [
      { from: 0, to: 64, server: 'a', state: 'serving' },
    ])
    await expect(ShardHomes.open({ sharding, servers, directory })).rejects.toBeInstanceOf(
      ShardingMismatchError,
    )
  })

  it('is closed after close()', async () => {
    const homes = await ShardHomes.open({ sharding, servers, directory: map })
    await homes.close()
    expect(() => homes.serverOf(1)).toThrow(ConfigurationError)
    await expect(homes.writeHome(1)).rejects.toBeInstanceOf(ConfigurationError)
  })
})

describe('ShardHomes over a directory that changes', () => {
  it('refuses a refreshMs that is not below half of maxStaleMs', async () => {
    const directory = new MemoryDirectory(
      sharding,
      [{ from: 0, to: 63, server: 'a', state: 'serving' }],
      1000,
    )
    await expect(ShardHomes.open({ sharding, servers, directory, refreshMs: 500 })).rejects.toThrow(
      /refreshMs \(500\) must be below half the directory's maxStaleMs \(1000\)/,
    )
    await expect(
      ShardHomes.open({ sharding, servers, directory, refreshMs: 499 }),
    ).resolves.toBeInstanceOf(ShardHomes)
  })

  it('re-reads the directory in the background and routes by the new homes', async () => {
    const directory = twoServers()
    const homes = await open({ sharding, servers, directory, refreshMs: 20 })
    expect(homes.serverOf(40)).toBe('b')
    await directory.set(32, { server: 'c' })
    while (homes.snapshot.version < 2n) await sleep(5)
    expect(homes.serverOf(40)).toBe('c')
    expect(directory.reads).toBeGreaterThan(1)
  })

  it('refresh() returns a reading sent after it was called', async () => {
    const directory = twoServers()
    const homes = await open({ sharding, servers, directory, refreshMs: 1000 })
    await directory.set(0, { server: 'c' })
    expect((await homes.refresh()).version).toBe(2n)
    expect(homes.serverOf(0)).toBe('c')
  })

  it('a write waits while its shard switches, and goes to the new home once it serves', async () => {
    const directory = twoServers()
    const homes = await open({
      sharding,
      servers,
      directory,
      refreshMs: 1000,
      switchWaitMs: 60_000,
    })
    await directory.set(0, { state: 'switching' })
    await homes.refresh()
    expect(homes.serverOf(3)).toBe('a') // reads still go to the old home
    expect(homes.writeHomeNow(3)).toBeUndefined() // a write has to wait
    expect(homes.writeHomeNow(40)).toEqual({ server: 'b', handle: 'handle-b' })
    let settled = false
    const write = homes.writeHome(3).finally(() => {
      settled = true
    })
    const other = await homes.writeHome(40) // a shard that does not move is not held up
    expect(other.server).toBe('b')
    await sleep(150)
    expect(settled).toBe(false)
    await directory.set(0, { state: 'arriving', server: 'c' })
    await sleep(150)
    expect(homes.serverOf(3)).toBe('c') // reads go to the new home
    expect(settled).toBe(false)
    await directory.set(0, { state: 'serving' })
    expect(await write).toEqual({ server: 'c', handle: 'handle-c' })
    expect(homes.writeHomeNow(3)).toEqual({ server: 'c', handle: 'handle-c' })
  })

  it('a write to a moving shard fails with a retryable ShardMovingError after switchWaitMs', async () => {
    const directory = twoServers()
    await directory.set(32, { state: 'switching' })
    const homes = await open({ sharding, servers, directory, refreshMs: 1000, switchWaitMs: 200 })
    const readsBefore = directory.reads
    const error = await homes.writeHome(33).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(ShardMovingError)
    expect((error as ShardMovingError).retryable).toBe(true)
    expect((error as ShardMovingError).shard).toBe(33)
    expect(directory.reads).toBeGreaterThan(readsBefore) // it looked again while it waited
    await expect(homes.writeGroups([1, 33], (shard) => shard)).rejects.toBeInstanceOf(
      ShardMovingError,
    )
    const none = await open({ sharding, servers, directory, refreshMs: 1000, switchWaitMs: 0 })
    await expect(none.writeHome(33)).rejects.toBeInstanceOf(ShardMovingError)
  })

  it('a waiting write stops at once when its signal aborts', async () => {
    const directory = twoServers()
    await directory.set(32, { state: 'arriving' })
    const homes = await open({
      sharding,
      servers,
      directory,
      refreshMs: 1000,
      switchWaitMs: 60_000,
    })
    const controller = new AbortController()
    const write = homes.writeHome(40, controller.signal)
    await sleep(50)
    controller.abort()
    await expect(write).rejects.toBeInstanceOf(CancelledError)
    await expect(homes.writeHome(40, AbortSignal.abort())).rejects.toBeInstanceOf(CancelledError)
    expect(() => homes.writeHomeNow(40, AbortSignal.abort())).toThrow(CancelledError)
    expect(homes.writeHomeNow(1, new AbortController().signal)?.server).toBe('a')
    expect(homes.writeHomeNow(40, new AbortController().signal)).toBeUndefined() // arriving
  })

  it('never routes with a reading older than maxStaleMs: it refuses typed and reads again', async () => {
    const directory = new MemoryDirectory(
      sharding,
      [{ from: 0, to: 63, server: 'a', state: 'serving' }],
      100,
    )
    const homes = await open({ sharding, servers, directory, refreshMs: 40 })
    directory.failWith = new Error('directory down')
    await sleep(150)
    const stale = (() => {
      try {
        homes.serverOf(1)
      } catch (error) {
        return error
      }
    })()
    expect(stale).toBeInstanceOf(DirectoryStaleError)
    expect((stale as DirectoryStaleError).retryable).toBe(true)
    expect((stale as DirectoryStaleError).cause).toBe(directory.failWith)
    expect(() => homes.forId(idOn(1))).toThrow(DirectoryStaleError)
    expect(() => homes.groupByServer([1], (shard) => shard)).toThrow(DirectoryStaleError)
    await expect(homes.writeHome(1)).rejects.toBeInstanceOf(DirectoryStaleError)
    expect(homes.writeHomeNow(1)).toBeUndefined() // stale: writeHome reads again first
    await expect(homes.fanOut(async () => [])).rejects.toBeInstanceOf(DirectoryStaleError)
    // The directory answers again, and has moved the shards meanwhile.
    directory.failWith = undefined
    await directory.set(0, { server: 'b' })
    expect(await homes.writeHome(1)).toEqual({ server: 'b', handle: 'handle-b' })
    expect(homes.serverOf(1)).toBe('b')
  })

  it('a stale process reads the directory again before it routes a write', async () => {
    const directory = new MemoryDirectory(
      sharding,
      [{ from: 0, to: 63, server: 'a', state: 'serving' }],
      100,
    )
    // A refresh timer far beyond maxStaleMs stands for a process paused past it.
    const homes = await open({ sharding, servers, directory, refreshMs: 49 })
    directory.failWith = new Error('paused') // no background read succeeds meanwhile
    await directory.set(0, { server: 'c' })
    await sleep(150)
    directory.failWith = undefined
    expect(await homes.writeHome(9)).toEqual({ server: 'c', handle: 'handle-c' })
  })

  it('a machine that was suspended (its wall clock moved on, not its monotonic clock) reads again too', async () => {
    const directory = new MemoryDirectory(
      sharding,
      [{ from: 0, to: 63, server: 'a', state: 'serving' }],
      1000,
    )
    const homes = await open({ sharding, servers, directory, refreshMs: 400 })
    await directory.set(0, { server: 'b' })
    vi.useFakeTimers({ toFake: ['Date'] })
    try {
      vi.setSystemTime(Date.now() + 5000)
      expect(() => homes.serverOf(1)).toThrow(DirectoryStaleError)
      expect(homes.writeHomeNow(1)).toBeUndefined()
      expect((await homes.writeHome(1)).server).toBe('b')
      expect(homes.serverOf(1)).toBe('b')
    } finally {
      vi.useRealTimers()
    }
  })

  it('keeps routing by its reading while a new one names a server it does not know, until that goes stale', async () => {
    const directory = new MemoryDirectory(
      sharding,
      [{ from: 0, to: 63, server: 'a', state: 'serving' }],
      200,
    )
    const homes = await open({ sharding, servers: { a: 1, b: 2 }, directory, refreshMs: 20 })
    await directory.set(0, { server: 'z' })
    await expect(homes.refresh()).rejects.toThrow(/server "z", which is not among/)
    expect(homes.serverOf(0)).toBe('a')
    await sleep(250)
    const error = (() => {
      try {
        homes.serverOf(0)
      } catch (caught) {
        return caught
      }
    })()
    expect(error).toBeInstanceOf(DirectoryStaleError)
    expect((error as Error).cause).toBeInstanceOf(ConfigurationError)
  })

  it('refuses a reading whose version went back', async () => {
    const directory = twoServers()
    const homes = await open({ sharding, servers, directory, refreshMs: 1000 })
    await directory.set(0, { server: 'c' })
    await homes.refresh()
    directory.answer = { ...directory.snapshot(), version: 1n }
    await expect(homes.refresh()).rejects.toThrow(/went back from version 2 to 1/)
    expect(homes.serverOf(0)).toBe('c')
  })

  it('a directory change loses typed when another was first', async () => {
    const directory = twoServers()
    const first = directory.version
    await directory.set(0, { state: 'switching' })
    await expect(directory.compareAndSet(first, directory.entries)).rejects.toBeInstanceOf(
      DirectoryChangedError,
    )
  })
})

describe('StaticDirectory', () => {
  it('takes only a ShardMap', () => {
    expect(() => new StaticDirectory([] as never)).toThrow(InvalidArgumentError)
  })
})

describe('directory entries', () => {
  it('refuses bounds that are not shard numbers, typed, however many entries there are', () => {
    const entries = [
      { from: 1n, to: 2, server: 'a', state: 'serving' },
      { from: 3, to: 4, server: 'a', state: 'serving' },
    ]
    expect(() => checkDirectoryEntries(sharding, entries)).toThrow(ShardOutOfRangeError)
    expect(
      () =>
        new ShardMap(sharding, [
          { from: 3, to: 4, target: 'a' },
          { from: '1' as never, to: 2, target: 'b' },
        ]),
    ).toThrow(ShardOutOfRangeError)
  })
})
