import {
  type IdSource,
  InvalidArgumentError,
  type Layout,
  type ShardflakeError,
  ShardOutOfRangeError,
} from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

/** How a source is put through {@link describeIdSource}. */
export interface IdSourceSuiteOptions {
  /** Creates the source under test (once for the suite). Install whatever it needs here. */
  create: () => IdSource | Promise<IdSource>
  /** Two or more logical shards the source serves. */
  shards: readonly number[]
  /** A shard the source must refuse with `ShardOutOfRangeError`. @default the layout's shardCount */
  foreignShard?: number
  /**
   * True when IDs carry a time and shard (everything but ticket servers).
   * @default true
   */
  decodable?: boolean
  /**
   * How old an ID's embedded time may be when it arrives (prefetch buffers hand out IDs made
   * earlier), in ms.
   * @default 60_000
   */
  maxAgeMs?: number
  /** Concurrent callers in the concurrency test. @default 16 */
  concurrency?: number
  /** IDs each concurrent caller draws. @default 2_000 */
  idsPerCaller?: number
  /** Size of the one large batch. @default 20_000 */
  largeBatch?: number
  /** Called after the suite, before `source.close()`. */
  teardown?: () => void | Promise<void>
}

/**
 * The contract of `IdSource` (see its JSDoc), as tests. Every source runs it:
 *
 * ```ts
 * describeIdSource('PostgresSource', { create: () => new PostgresSource({ ... }), shards: [1, 2] })
 * ```
 */
export function describeIdSource(name: string, options: IdSourceSuiteOptions): void {
  const decodable = options.decodable ?? true
  const maxAgeMs = options.maxAgeMs ?? 60_000
  const concurrency = options.concurrency ?? 16
  const idsPerCaller = options.idsPerCaller ?? 2_000
  const largeBatch = options.largeBatch ?? 20_000
  const [shardA, shardB] = options.shards as [number, number]

  describe(`IdSource conformance: ${name}`, () => {
    let source: IdSource
    let layout: Layout | undefined

    beforeAll(async () => {
      expect(options.shards.length).toBeGreaterThanOrEqual(2)
      source = await options.create()
      layout = source.layout
    })

    afterAll(async () => {
      await options.teardown?.()
      await source?.close?.()
    })

    it('returns a bigint for the requested shard, made about now', async () => {
      const before = Date.now()
      const id = await source.nextId(shardA)
      const after = Date.now()
      expect(typeof id).toBe('bigint')
      if (decodable) {
        const decoded = layout!.decompose(id)
        expect(decoded.shard).toBe(shardA)
        expect(decoded.timestampMs).toBeGreaterThanOrEqual(before - maxAgeMs - layout!.timeUnitMs)
        expect(decoded.timestampMs).toBeLessThanOrEqual(after + 1_000)
      }
    })

    it('answers synchronously exactly when it says so', async () => {
      const result = source.nextId(shardA)
      expect(result instanceof Promise).toBe(!source.synchronous)
      await result
    })

    it('returns a batch of distinct, ascending IDs of the shard', async () => {
      const ids = await source.nextIds(shardB, 1_000)
      expect(ids).toHaveLength(1_000)
      expect(new Set(ids).size).toBe(1_000)
      for (const id of ids) expect(typeof id).toBe('bigint')
      if (decodable) {
        for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true)
        for (const id of ids) expect(layout!.shardOf(id)).toBe(shardB)
      }
    })

    it('keeps IDs of one shard ascending across calls', async () => {
      if (!decodable) {
        expect(layout).toBeUndefined()
        return
      }
      const ids: bigint[] = []
      for (let i = 0; i < 50; i++) ids.push(await source.nextId(shardA))
      ids.push(...(await source.nextIds(shardA, 50)))
      for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true)
    })

    it(`returns ${largeBatch} distinct IDs in one batch`, async () => {
      const ids = await source.nextIds(shardA, largeBatch)
      expect(new Set(ids).size).toBe(largeBatch)
    })

    it(`never repeats an ID across ${concurrency} concurrent callers and shards`, async () => {
      const callers = Array.from({ length: concurrency }, async (_, caller) => {
        const ids: bigint[] = []
        const shard = caller % 2 === 0 ? shardA : shardB
        while (ids.length < idsPerCaller) {
          if (ids.length % 3 === 0) ids.push(await source.nextId(shard))
          else ids.push(...(await source.nextIds(shard, Math.min(97, idsPerCaller - ids.length))))
        }
        return ids
      })
      const all = (await Promise.all(callers)).flat()
      expect(all).toHaveLength(concurrency * idsPerCaller)
      expect(new Set(all).size).toBe(all.length)
      if (decodable) {
        const perShard = new Map<number, number>()
        for (const id of all) {
          const shard = layout!.shardOf(id)
          perShard.set(shard, (perShard.get(shard) ?? 0) + 1)
        }
        expect(perShard.get(shardA)).toBe(Math.ceil(concurrency / 2) * idsPerCaller)
        expect(perShard.get(shardB)).toBe(Math.floor(concurrency / 2) * idsPerCaller)
      }
    })

    it('refuses a count that is not a positive integer', async () => {
      for (const count of [0, -1, 1.5, Number.NaN]) {
        await expect(async () => source.nextIds(shardA, count)).rejects.toBeInstanceOf(
          InvalidArgumentError,
        )
      }
    })

    it('refuses a shard it does not serve, with ShardOutOfRangeError', async () => {
      const foreign = options.foreignShard ?? layout?.shardCount ?? -1
      for (const shard of [foreign, -1, 1.5]) {
        const error = await captureError(() => source.nextId(shard))
        expect(error).toBeInstanceOf(ShardOutOfRangeError)
        expect((error as ShardflakeError).code).toBe('SHARD_OUT_OF_RANGE')
      }
    })
  })
}

async function captureError(action: () => unknown): Promise<unknown> {
  try {
    await action()
  } catch (error) {
    return error
  }
  throw new Error('Expected an error, got none.')
}
