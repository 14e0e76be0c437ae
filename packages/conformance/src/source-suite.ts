import {
  CancelledError,
  type IdSource,
  InvalidArgumentError,
  MAX_IDS_PER_CALL,
  ShardflakeError,
  type Sharding,
  ShardingMismatchError,
  ShardOutOfRangeError,
} from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

/** How a source is put through {@link describeIdSource}. */
export interface IdSourceSuiteOptions {
  /** Creates the source under test (once for the suite). Install whatever it needs here. */
  create: () => IdSource | Promise<IdSource>
  /** Two or more logical shards the source serves. */
  shards: readonly number[]
  /**
   * The sharding the source was made with; the suite checks `source.sharding` against it. Sources
   * of plain IDs (ticket servers) are recognised by `source.sharding === undefined`.
   */
  sharding?: Sharding
  /**
   * A shard the source must refuse with `ShardOutOfRangeError`.
   * @default `sharding.logicalShards` (the first shard past the logical shards)
   */
  foreignShard?: number
  /** Concurrent callers in the concurrency test. @default 16 */
  concurrency?: number
  /** IDs each concurrent caller draws. @default 2_000 */
  idsPerCaller?: number
  /** Size of the one large batch. @default 20_000 */
  largeBatch?: number
  /**
   * Whether the source honours `context.signal`: a signal that has aborted gives
   * `CancelledError` and no ID. Every database, ticket-server and Redis source does.
   * @default true for an asynchronous source, false for a synchronous one
   */
  cancellable?: boolean
  /**
   * Builds the source the way a user who forgot the sharding would (same servers, no
   * `sharding`). It must refuse, when constructed or at its first call, with a ShardflakeError
   * whose message names `logicalShards`. Leave it out for sources that take no sharding.
   */
  createWithoutSharding?: () => IdSource | Promise<IdSource>
  /**
   * Builds the source over the same installation with another sharding (other `logicalShards`,
   * say). It must refuse, when constructed or at its first call, with ShardingMismatchError.
   */
  createWithOtherSharding?: () => IdSource | Promise<IdSource>
  /** Called after the suite, after `source.close()`. */
  teardown?: () => void | Promise<void>
}

/**
 * The contract of `IdSource` (see its JSDoc), as tests. Every source runs it:
 *
 * ```ts
 * describeIdSource('PostgresSource', {
 *   sharding,
 *   shards: [1, 2],
 *   create: () => new PostgresSource({ sharding, databases }),
 * })
 * ```
 *
 * Sources whose IDs carry a time and a shard (`source.sharding` set) are checked for the shard
 * and order of every ID; sources of plain IDs (`sharding: undefined`) for uniqueness only. The
 * source is closed by the last test (twice: `close()` must be idempotent).
 */
export function describeIdSource(name: string, options: IdSourceSuiteOptions): void {
  const concurrency = options.concurrency ?? 16
  const idsPerCaller = options.idsPerCaller ?? 2_000
  const largeBatch = options.largeBatch ?? 20_000
  const [shardA, shardB] = options.shards as [number, number]

  describe(`IdSource conformance: ${name}`, () => {
    let source: IdSource
    let sharding: Sharding | undefined
    let closed = false

    beforeAll(async () => {
      expect(options.shards.length).toBeGreaterThanOrEqual(2)
      source = await options.create()
      sharding = source.sharding
      if (options.sharding) {
        expect(sharding, 'source.sharding').toBeDefined()
        options.sharding.checkSame(sharding!, 'the source under test')
      }
    })

    afterAll(async () => {
      if (!closed) await source?.close()
      await options.teardown?.()
    })

    /** Every ID of a batch is on `shard`, and the batch is ascending. */
    const expectShardAndOrder = (ids: readonly bigint[], shard: number) => {
      if (!sharding) return
      for (const id of ids) expect(sharding.shardOfId(id)).toBe(shard)
      for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true)
    }

    it('returns a bigint of the requested shard, whose fields decode within the layout', async () => {
      // No comparison with this machine's clock: a database source stamps IDs with the server's.
      const id = await source.nextId(shardA)
      expect(typeof id).toBe('bigint')
      if (sharding) {
        const { layout } = sharding
        expect(sharding.shardOfId(id)).toBe(shardA)
        const decoded = layout.decompose(id)
        expect(decoded.timestampMs).toBeGreaterThanOrEqual(layout.epoch)
        expect(layout.compose(decoded)).toBe(id)
      }
    })

    it('answers synchronously exactly when it says so, for every shard', async () => {
      for (const shard of [shardA, shardB]) {
        const single = source.nextId(shard)
        expect(single instanceof Promise, `nextId(${shard})`).toBe(!source.synchronous)
        await single
        const batch = source.nextIds(shard, 2)
        expect(batch instanceof Promise, `nextIds(${shard}, 2)`).toBe(!source.synchronous)
        await batch
      }
    })

    it('returns a batch of distinct, ascending IDs of the asked shard', async () => {
      const ids = await source.nextIds(shardB, 1_000)
      expect(ids).toHaveLength(1_000)
      expect(new Set(ids).size).toBe(1_000)
      for (const id of ids) expect(typeof id).toBe('bigint')
      expectShardAndOrder(ids, shardB)
    })

    it('keeps IDs of one shard ascending across calls', async () => {
      const ids: bigint[] = []
      for (let i = 0; i < 50; i++) ids.push(await source.nextId(shardA))
      ids.push(...(await source.nextIds(shardA, 50)))
      expect(new Set(ids).size).toBe(ids.length)
      expectShardAndOrder(ids, shardA)
    })

    it(`returns ${largeBatch} distinct IDs in one batch`, async () => {
      const ids = await source.nextIds(shardA, largeBatch)
      expect(new Set(ids).size).toBe(largeBatch)
      expectShardAndOrder(ids, shardA)
    })

    it(`never repeats an ID across ${concurrency} concurrent callers and shards`, async () => {
      const callers = Array.from({ length: concurrency }, async (_, caller) => {
        const ids: bigint[] = []
        const shard = caller % 2 === 0 ? shardA : shardB
        while (ids.length < idsPerCaller) {
          if (ids.length % 3 === 0) ids.push(await source.nextId(shard))
          else {
            const batch = await source.nextIds(shard, Math.min(97, idsPerCaller - ids.length))
            expectShardAndOrder(batch, shard)
            ids.push(...batch)
          }
        }
        return ids
      })
      const all = (await Promise.all(callers)).flat()
      expect(all).toHaveLength(concurrency * idsPerCaller)
      expect(new Set(all).size).toBe(all.length)
      if (sharding) {
        const perShard = new Map<number, number>()
        for (const id of all) {
          const shard = sharding.shardOfId(id)
          perShard.set(shard, (perShard.get(shard) ?? 0) + 1)
        }
        expect(perShard.get(shardA)).toBe(Math.ceil(concurrency / 2) * idsPerCaller)
        expect(perShard.get(shardB)).toBe(Math.floor(concurrency / 2) * idsPerCaller)
      }
    })

    it(`refuses a count of 0 or above MAX_IDS_PER_CALL (${MAX_IDS_PER_CALL}) with InvalidArgumentError, before any other check`, async () => {
      // A count is checked first: even for a shard the source does not serve, the answer is
      // InvalidArgumentError, so no server was asked.
      const foreign = options.foreignShard ?? sharding?.logicalShards ?? -1
      for (const count of [MAX_IDS_PER_CALL + 1, 0, -1, 1.5, Number.NaN, 2 ** 31]) {
        for (const shard of [shardA, foreign]) {
          const error = await captureError(() => source.nextIds(shard, count))
          expect(error, `nextIds(${shard}, ${count})`).toBeInstanceOf(InvalidArgumentError)
          expect((error as ShardflakeError).code).toBe('INVALID_ARGUMENT')
        }
      }
    })

    it('refuses a shard it does not serve, with ShardOutOfRangeError', async () => {
      const foreign = options.foreignShard ?? sharding?.logicalShards ?? -1
      for (const shard of [foreign, -1, 1.5]) {
        for (const call of [() => source.nextId(shard), () => source.nextIds(shard, 2)]) {
          const error = await captureError(call)
          expect(error, `shard ${shard}`).toBeInstanceOf(ShardOutOfRangeError)
          expect((error as ShardflakeError).code).toBe('SHARD_OUT_OF_RANGE')
        }
      }
    })

    it('gives CancelledError and no ID for a signal that has aborted (asynchronous sources)', async () => {
      if (!(options.cancellable ?? !source.synchronous)) {
        // A synchronous source answers before anyone could abort: there is nothing to cancel.
        expect(source.synchronous).toBe(true)
        return
      }
      const signal = AbortSignal.abort(new Error('the caller gave up'))
      for (const call of [
        () => source.nextId(shardA, { signal }),
        () => source.nextIds(shardA, 5, { signal }),
      ]) {
        const error = await captureError(call)
        expect(error).toBeInstanceOf(CancelledError)
        expect((error as ShardflakeError).code).toBe('CANCELLED')
      }
      expect(await source.nextIds(shardA, 2)).toHaveLength(2)
    })

    if (options.createWithoutSharding) {
      const create = options.createWithoutSharding
      it('refuses to start without a sharding, naming logicalShards', async () => {
        const error = await captureError(() => firstCall(create, shardA))
        expect((error as Error).message).toMatch(/logicalShards/)
      })
    }

    if (options.createWithOtherSharding) {
      const create = options.createWithOtherSharding
      it('refuses a sharding other than the installed one with ShardingMismatchError', async () => {
        const error = await captureError(() => firstCall(create, shardA))
        expect(error).toBeInstanceOf(ShardingMismatchError)
        expect((error as ShardflakeError).code).toBe('SHARDING_MISMATCH')
      })
    }

    it('still serves after refusing, and closes (twice without complaint)', async () => {
      const [id] = await source.nextIds(shardB, 1)
      expect(typeof id).toBe('bigint')
      closed = true
      await source.close()
      await source.close()
    })
  })
}

/** Creates a source and asks it for one ID; closes it whatever happens. */
async function firstCall(
  create: () => IdSource | Promise<IdSource>,
  shard: number,
): Promise<bigint> {
  const source = await create()
  try {
    return await source.nextId(shard)
  } finally {
    await source.close()
  }
}

/** Runs `action`; returns what it threw (sync or async), which must be a ShardflakeError. */
async function captureError(action: () => unknown): Promise<unknown> {
  let error: unknown
  try {
    await action()
  } catch (caught) {
    error = caught
  }
  if (error === undefined) throw new Error('Expected an error, got none.')
  expect(error, 'every error a source throws is a ShardflakeError').toBeInstanceOf(ShardflakeError)
  return error
}
