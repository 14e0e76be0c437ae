import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  CancelledError,
  ConfigurationError,
  type IdSource,
  InvalidArgumentError,
  instagram,
  MAX_IDS_PER_CALL,
  PrefetchSource,
  SourceUnavailableError,
} from '../src'
import { openSource, sharding } from './support'

const realNow = Date.now

/** An async source over the in-process generator that records every batch it is asked for. */
function countingSource() {
  // The real clock, even where a test fakes Date for the buffers' age: the generator's shard
  // claims outlive the test, and a faked future would leave the next test's clock behind.
  const inner = openSource({ shards: 'all', clock: realNow })
  const calls: Array<[shard: number, count: number]> = []
  const contexts: unknown[] = []
  let failNext = false
  const source: IdSource = {
    sharding,
    synchronous: false,
    async nextId(shard) {
      return (await this.nextIds(shard, 1))[0]!
    },
    async nextIds(shard, count, context) {
      calls.push([shard, count])
      contexts.push(context)
      await new Promise((resolve) => setTimeout(resolve, 1))
      if (failNext) {
        failNext = false
        throw new SourceUnavailableError('down')
      }
      return inner.nextIds(shard, count)
    },
    close: () => inner.close(),
  }
  return { source, calls, contexts, failOnce: () => (failNext = true) }
}

const ascending = (ids: readonly bigint[]) => ids.every((id, i) => i === 0 || ids[i - 1]! < id)

describe('PrefetchSource', () => {
  afterEach(() => vi.useRealTimers())

  it('serves single IDs and small batches from one round trip per shard', async () => {
    const { source, calls } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 100, refillAhead: false })
    expect(prefetch.sharding).toBe(sharding)
    const ids: bigint[] = []
    for (let i = 0; i < 10; i++) ids.push(await prefetch.nextId(5))
    for (let i = 0; i < 9; i++) ids.push(...(await prefetch.nextIds(5, 10)))
    expect(calls).toEqual([[5, 100]])
    expect(ids).toHaveLength(100)
    expect(ascending(ids)).toBe(true)
    expect(ids.every((id) => instagram.shardOf(id) === 5)).toBe(true)
    await prefetch.nextId(5)
    await prefetch.nextId(9)
    expect(calls).toEqual([
      [5, 100],
      [5, 100],
      [9, 100],
    ])
  })

  it('uses what is left first, and fetches a large batch plus the buffer size', async () => {
    const { source, calls } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 10, refillAhead: false })
    const first = await prefetch.nextIds(5, 7)
    const second = await prefetch.nextIds(5, 25)
    expect(calls).toEqual([
      [5, 10],
      [5, 32],
    ])
    const all = [...first, ...second]
    expect(ascending(all)).toBe(true)
    expect(new Set(all).size).toBe(32)
    await prefetch.nextIds(5, 10)
    expect(calls).toHaveLength(2)
  })

  it('shares one fetch between concurrent callers and never repeats an ID', async () => {
    const { source, calls } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 50 })
    const batches = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        i % 2 ? prefetch.nextId(5).then((id) => [id]) : prefetch.nextIds(5, 3),
      ),
    )
    const all = batches.flat()
    expect(all).toHaveLength(400)
    expect(new Set(all).size).toBe(400)
    for (const batch of batches) expect(ascending(batch)).toBe(true)
    expect(calls.length).toBeLessThanOrEqual(10)
  })

  it('refills ahead: once fewer than half of size are left, the next size IDs are fetched in the background', async () => {
    const requests: Array<{ count: number; release: () => void }> = []
    const generator = openSource({ shards: 'all', clock: realNow })
    const inner: IdSource = {
      sharding,
      synchronous: false,
      nextId: async () => 0n,
      // Each fetch waits until the test releases it.
      nextIds: (shard, count) =>
        new Promise<bigint[]>((resolve) =>
          requests.push({ count, release: () => resolve(generator.nextIds(shard, count)) }),
        ),
      close: () => generator.close(),
    }
    const prefetch = new PrefetchSource(inner, { size: 100 })
    expect(requests).toHaveLength(0)
    const first = prefetch.nextIds(5, 60)
    await vi.waitFor(() => expect(requests).toHaveLength(1))
    requests[0]!.release()
    const ids = await first
    // 40 left, fewer than 50: the next 100 are on their way, nobody waits for them.
    expect(requests.map((r) => r.count)).toEqual([100, 100])
    // Served from what is left while that fetch is still out: no waiting.
    ids.push(...(await prefetch.nextIds(5, 40)))
    expect(requests).toHaveLength(2)
    const waiting = prefetch.nextId(5)
    requests[1]!.release()
    ids.push(await waiting)
    expect(requests).toHaveLength(2)
    expect(ids).toHaveLength(101)
    expect(ascending(ids)).toBe(true)
    // Above half again after the refill: no further fetch until the buffer runs low.
    ids.push(...(await prefetch.nextIds(5, 49)))
    expect(requests).toHaveLength(2)
    ids.push(await prefetch.nextId(5))
    expect(requests).toHaveLength(3)
    // A refill that lands while IDs are left adds to them: 49 + 100 served without a fetch.
    requests[2]!.release()
    await new Promise((resolve) => setTimeout(resolve, 0))
    ids.push(...(await prefetch.nextIds(5, 149)))
    expect(new Set(ids).size).toBe(300)
    expect(requests).toHaveLength(4) // (none left: the next refill)
    expect(ascending(ids)).toBe(true)
    await prefetch.close()
  })

  it('refills ahead when fewer are left than the call took: batches of size are served from the buffer', async () => {
    const { source, calls } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 1000 })
    const ids = [await prefetch.nextId(5)] // 999 left: more than half, and more than 1
    expect(calls).toHaveLength(1)
    ids.push(...(await prefetch.nextIds(5, 1000))) // 999 + 1 of a fetch; 999 left, fewer than 1000
    expect(calls).toHaveLength(3)
    await new Promise((resolve) => setTimeout(resolve, 20)) // the refill lands
    ids.push(...(await prefetch.nextIds(5, 1000))) // served from the buffer; then the next refill
    expect(calls).toHaveLength(4)
    expect(new Set(ids).size).toBe(2001)
    expect(ascending(ids)).toBe(true)
    await prefetch.close()
  })

  it('a background refill that fails reaches the calls waiting for it, no one else, and the next call fetches again', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const { source, calls, failOnce } = countingSource()
      const prefetch = new PrefetchSource(source, { size: 10 })
      await prefetch.nextIds(5, 6) // 4 left: a refill starts, and fails
      failOnce()
      expect(calls).toHaveLength(2)
      await new Promise((resolve) => setTimeout(resolve, 20))
      expect(unhandled).toEqual([])
      // The 4 left are served; then a fetch again.
      const ids = await prefetch.nextIds(5, 10)
      expect(new Set(ids).size).toBe(10)
      // (and, 4 left again, the next refill)
      expect(calls).toEqual([
        [5, 10],
        [5, 10],
        [5, 10],
        [5, 10],
      ])
      await prefetch.close()
      // A caller waiting for a failing refill gets its error, typed.
      const { source: second, failOnce: failSecond } = countingSource()
      const other = new PrefetchSource(second, { size: 10 })
      await other.nextIds(5, 10) // none left: a refill starts
      failSecond()
      await expect(other.nextId(5)).rejects.toBeInstanceOf(SourceUnavailableError)
      expect(instagram.shardOf(await other.nextId(5))).toBe(5)
      await other.close()
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it('close() while a background refill runs ends it: nothing hangs, nothing is left unhandled', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const generator = openSource({ shards: 'all', clock: realNow })
      let fetches = 0
      let endRefill: (() => void) | undefined
      const inner: IdSource = {
        sharding,
        synchronous: false,
        nextId: async () => 0n,
        // The first fetch answers; the refill hangs until the source is closed.
        nextIds: async (shard, count) => {
          if (fetches++ === 0) return generator.nextIds(shard, count)
          return await new Promise<bigint[]>((_, reject) => {
            endRefill = () => reject(new CancelledError('closed'))
          })
        },
        close: () => {
          endRefill?.()
          generator.close()
        },
      }
      const prefetch = new PrefetchSource(inner, { size: 10 })
      await prefetch.nextIds(5, 8)
      expect(fetches).toBe(2)
      await prefetch.close()
      await new Promise((resolve) => setTimeout(resolve, 10))
      expect(unhandled).toEqual([])
      await expect(prefetch.nextId(5)).rejects.toBeInstanceOf(ConfigurationError)
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it('drops IDs older than maxAgeMs', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    const { source, calls } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 100, maxAgeMs: 500 })
    const a = await prefetch.nextId(5)
    vi.setSystemTime(Date.now() + 400)
    await prefetch.nextId(5)
    expect(calls).toHaveLength(1)
    vi.setSystemTime(Date.now() + 200)
    const c = await prefetch.nextId(5)
    expect(calls).toHaveLength(2)
    expect(c).toBeGreaterThan(a)
  })

  it('passes a failed fetch on and fetches again on the next call', async () => {
    const { source, calls, failOnce } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 10 })
    failOnce()
    await expect(prefetch.nextId(5)).rejects.toBeInstanceOf(SourceUnavailableError)
    expect(instagram.shardOf(await prefetch.nextId(5))).toBe(5)
    expect(calls).toHaveLength(2)
  })

  it("never fills a shared buffer on a caller's connection (its rollback could give the IDs back)", async () => {
    const { source, calls, contexts } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 10 })
    const query = async () => [] as Record<string, unknown>[]
    const ids = [await prefetch.nextId(5, { query }), ...(await prefetch.nextIds(5, 30, { query }))]
    expect(new Set(ids).size).toBe(31)
    expect(calls).toEqual([
      [5, 10],
      [5, 31],
    ])
    expect(contexts).toEqual([undefined, undefined])
  })

  it('refuses bad options and counts at once, naming the bounds', async () => {
    const { source } = countingSource()
    for (const options of [
      { size: 0 },
      { size: 1.5 },
      { size: 2e6 },
      { size: 10, maxAgeMs: -1 },
      { size: 10, maxAgeMs: Number.NaN },
    ]) {
      expect(() => new PrefetchSource(source, options)).toThrow(InvalidArgumentError)
    }
    expect(() => new PrefetchSource(source, { size: 2e6 })).toThrow(
      'PrefetchSource options.size must be an integer from 1 to 1000000, got 2000000.',
    )
    for (const count of [0, MAX_IDS_PER_CALL + 1]) {
      await expect(async () =>
        new PrefetchSource(source, { size: 10 }).nextIds(5, count),
      ).rejects.toBeInstanceOf(InvalidArgumentError)
    }
  })

  it('refuses a missing source or options, and misspelled options, naming the closest', () => {
    const { source } = countingSource()
    // As a JavaScript caller may call it.
    const construct = (...args: unknown[]) => Reflect.construct(PrefetchSource, args)
    expect(() => construct(undefined, { size: 10 })).toThrow(InvalidArgumentError)
    expect(() => construct(source)).toThrow(InvalidArgumentError)
    expect(() => construct(source, {})).toThrow('PrefetchSource options needs size')
    expect(() => construct(source, { size: 10, refillAhead: 'yes' })).toThrow(
      'PrefetchSource options.refillAhead must be true or false, got "yes".',
    )
    expect(() => construct(source, { size: 10, maxAgeMS: 5 })).toThrow(
      'PrefetchSource options has no option "maxAgeMS". Did you mean "maxAgeMs"?',
    )
  })

  it('serves the largest valid count with any size (the fetch stops at MAX_IDS_PER_CALL)', async () => {
    const { source, calls } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 100 })
    const ids = await prefetch.nextIds(5, MAX_IDS_PER_CALL)
    expect(ids).toHaveLength(MAX_IDS_PER_CALL)
    expect(ascending(ids)).toBe(true)
    expect(calls[0]).toEqual([5, MAX_IDS_PER_CALL])
    await prefetch.close()
  })

  it('an aborted signal gives CancelledError and no ID, before or during the call', async () => {
    const { source, calls } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 10 })
    await prefetch.nextId(5) // the buffer holds 9 more: even those are not handed out
    const aborted = AbortSignal.abort()
    await expect(prefetch.nextId(5, { signal: aborted })).rejects.toBeInstanceOf(CancelledError)
    await expect(prefetch.nextIds(9, 3, { signal: aborted })).rejects.toBeInstanceOf(CancelledError)
    expect(calls).toEqual([[5, 10]])
    const controller = new AbortController()
    const waiting = prefetch.nextIds(9, 3, { signal: controller.signal })
    controller.abort()
    await expect(waiting).rejects.toBeInstanceOf(CancelledError)
    // The fetch it started goes on for the next caller.
    expect(instagram.shardOf(await prefetch.nextId(9))).toBe(9)
    expect(calls).toEqual([
      [5, 10],
      [9, 10],
    ])
    await prefetch.close()
  })

  it('a fetch that fails after its only caller gave up reaches nobody, and the next call fetches again', async () => {
    const { source, failOnce } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 10 })
    failOnce()
    const controller = new AbortController()
    const waiting = prefetch.nextId(5, { signal: controller.signal })
    controller.abort()
    await expect(waiting).rejects.toBeInstanceOf(CancelledError)
    await new Promise((resolve) => setTimeout(resolve, 20)) // the fetch fails meanwhile
    expect(instagram.shardOf(await prefetch.nextId(5))).toBe(5)
    await prefetch.close()
  })

  it('close() ends the calls waiting for a fetch at once, and later calls are refused', async () => {
    let release: () => void = () => undefined
    const inner: IdSource = {
      sharding,
      synchronous: false,
      nextId: async () => 0n,
      nextIds: () => new Promise<bigint[]>((resolve) => (release = () => resolve([]))),
      close: () => release(),
    }
    const prefetch = new PrefetchSource(inner, { size: 10 })
    const waiting = [prefetch.nextId(5), prefetch.nextIds(6, 2)]
    await prefetch.close()
    for (const call of waiting) await expect(call).rejects.toBeInstanceOf(CancelledError)
    await expect(prefetch.nextId(5)).rejects.toBeInstanceOf(ConfigurationError)
  })

  it('closes the inner source, twice without complaint', async () => {
    const { source, calls } = countingSource()
    const prefetch = new PrefetchSource(source, { size: 10 })
    await prefetch.nextId(5)
    await prefetch.close()
    await prefetch.close()
    await expect(async () => source.nextIds(5, 1)).rejects.toBeInstanceOf(ConfigurationError)
    expect(calls).toHaveLength(2)
  })
})
