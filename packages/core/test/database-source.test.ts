import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import {
  CancelledError,
  ConfigurationError,
  checkServedShard,
  closeWithin,
  contextQueryRule,
  defineSharding,
  InvalidArgumentError,
  instagram,
  OpenedPools,
  OpenSockets,
  RunningCalls,
  ShardingMismatchError,
  ShardMap,
  ShardOutOfRangeError,
  toShardMap,
} from '../src/index'

const sharding = defineSharding({ layout: instagram, logicalShards: 16 })

describe('toShardMap', () => {
  it('reads one database (all shards, a range, a list), ranges and a ShardMap', () => {
    expect(toShardMap(sharding, 'url-a', undefined).targetFor(15)).toBe('url-a')
    const range = toShardMap(sharding, 'url-a', { from: 2, to: 4 })
    expect([range.has(1), range.has(2), range.has(4), range.has(5)]).toEqual([
      false,
      true,
      true,
      false,
    ])
    const list = toShardMap(sharding, 'url-a', '1-2,7')
    expect([1, 2, 3, 7].map((shard) => list.has(shard))).toEqual([true, true, false, true])
    const ranges = toShardMap(
      sharding,
      [
        { from: 0, to: 7, target: 'a' },
        { from: 8, to: 15, target: 'b' },
      ],
      undefined,
    )
    expect([ranges.targetFor(7), ranges.targetFor(8)]).toEqual(['a', 'b'])
    const map = ShardMap.single(sharding, 'a')
    expect(toShardMap(sharding, map, undefined)).toBe(map)
  })

  it('refuses a ShardMap of another sharding, an empty list and no databases', () => {
    const other = ShardMap.single(defineSharding({ layout: instagram, logicalShards: 32 }), 'a')
    expect(() => toShardMap(sharding, other, undefined)).toThrow(ShardingMismatchError)
    expect(() => toShardMap(sharding, 'a', [])).toThrow(InvalidArgumentError)
    expect(() => toShardMap(sharding, undefined as never, undefined)).toThrow(ConfigurationError)
  })
})

describe('checkServedShard and contextQueryRule', () => {
  it('refuses shards outside the logical shards or the map; reads the option per shard', () => {
    const map = toShardMap(sharding, 'a', { from: 0, to: 3 })
    expect(() => checkServedShard(map, 3)).not.toThrow()
    expect(() => checkServedShard(map, 4)).toThrow(ShardOutOfRangeError)
    expect(() => checkServedShard(map, 16)).toThrow(ShardOutOfRangeError)
    expect(contextQueryRule(undefined)(1)).toBe(false)
    expect(contextQueryRule(true)(1)).toBe(true)
    expect([1, 2].map(contextQueryRule((shard) => shard === 2))).toEqual([false, true])
    for (const option of ['yes', 1, {}]) {
      expect(() => Reflect.apply(contextQueryRule, undefined, [option])).toThrow(
        InvalidArgumentError,
      )
    }
  })
})

describe('OpenedPools', () => {
  it('opens one pool per URL and ends exactly those on close, passing over failures', async () => {
    const ended: string[] = []
    const opened: string[] = []
    const pools = new OpenedPools(async (url: string) => {
      opened.push(url)
      if (url === 'bad') throw new Error('refused')
      return { end: async () => void ended.push(url) }
    })
    const first = await pools.get('a')
    expect(await pools.get('a')).toBe(first)
    await pools.get('b')
    await expect(pools.get('bad')).rejects.toThrow('refused')
    await pools.close()
    expect(opened).toEqual(['a', 'b', 'bad'])
    expect(ended.sort()).toEqual(['a', 'b'])
  })

  it('destroys a pool whose end() has not finished within the bound, and returns', async () => {
    const destroyed: string[] = []
    const pools = new OpenedPools(
      async (url: string) => ({ url, end: () => new Promise<void>(() => undefined) }),
      { destroy: (pool) => void destroyed.push(pool.url) },
    )
    await pools.get('hung')
    await pools.close(20)
    expect(destroyed).toEqual(['hung'])
  })
})

describe('closeWithin', () => {
  it('forces what did not end in time or failed, never what ended; never rejects', async () => {
    const forced: string[] = []
    await closeWithin(
      1000,
      async () => undefined,
      () => forced.push('ended'),
    )
    await closeWithin(
      10,
      () => new Promise(() => undefined),
      () => forced.push('hung'),
    )
    await closeWithin(
      1000,
      async () => {
        throw new Error('refused')
      },
      () => {
        forced.push('failed')
        throw new Error('and the force too')
      },
    )
    expect(forced).toEqual(['hung', 'failed'])
  })
})

describe('OpenSockets', () => {
  class FakeSocket extends EventEmitter {
    destroyed = false
    destroy() {
      this.destroyed = true
      this.emit('close')
    }
  }

  it('waits for the sockets to close, and destroys those still open', async () => {
    const sockets = new OpenSockets<FakeSocket>()
    await sockets.closed()
    const [a, b] = [sockets.add(new FakeSocket()), sockets.add(new FakeSocket())]
    let closed = false
    const waiting = sockets.closed().then(() => (closed = true))
    a.emit('close')
    await Promise.resolve()
    expect(closed).toBe(false)
    sockets.destroy()
    await waiting
    expect([a.destroyed, b.destroyed]).toEqual([false, true])
  })
})

describe('RunningCalls', () => {
  it('ends running calls at once on close, refuses later ones, and stops the work', async () => {
    const calls = new RunningCalls('TestSource')
    const signals: AbortSignal[] = []
    const running = calls.run('shard 5', undefined, (signal) => {
      signals.push(signal)
      return new Promise<number>(() => undefined)
    })
    expect(await calls.run('shard 6', undefined, async () => 6)).toBe(6)
    calls.close()
    await expect(running).rejects.toThrow(
      'shard 5: the TestSource was closed while the call ran. Nothing was issued.',
    )
    await expect(running).rejects.toBeInstanceOf(CancelledError)
    expect(signals[0]!.aborted).toBe(true)
    await expect(calls.run('shard 7', undefined, async () => 7)).rejects.toBeInstanceOf(
      ConfigurationError,
    )
  })

  it("passes the caller's abort on to the work, and refuses an aborted or bad signal", async () => {
    const calls = new RunningCalls('TestSource')
    const controller = new AbortController()
    const running = calls.run('shard 5', controller.signal, (signal) => {
      return new Promise<number>((_, reject) =>
        signal.addEventListener('abort', () => reject(new CancelledError('stopped'))),
      )
    })
    controller.abort()
    await expect(running).rejects.toThrow('stopped')
    let started = false
    const work = async () => {
      started = true
      return 1
    }
    await expect(calls.run('shard 5', AbortSignal.abort(), work)).rejects.toBeInstanceOf(
      CancelledError,
    )
    await expect(Reflect.apply(calls.run, calls, ['shard 5', {}, work])).rejects.toBeInstanceOf(
      InvalidArgumentError,
    )
    expect(started).toBe(false)
  })
})
