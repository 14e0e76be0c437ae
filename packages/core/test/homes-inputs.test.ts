/**
 * Any input to the shard-homes API either works or throws a ShardflakeError with a known code:
 * never a TypeError from deep inside, never a hang.
 */
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as core from '../src'
import {
  checkDirectoryEntries,
  checkExpectedVersion,
  defineSharding,
  instagram,
  readMaxStaleMs,
  ShardflakeError,
  ShardHomes,
  ShardMap,
  StaticDirectory,
  toDirectorySnapshot,
} from '../src'
import { MemoryDirectory } from './memory-directory'

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })

/** Every code of every error class core exports. */
const KNOWN_CODES = new Set(
  Object.values(core as Record<string, unknown>).flatMap((value) =>
    typeof value === 'function' && value.prototype instanceof ShardflakeError
      ? [(value as typeof ShardflakeError).code]
      : [],
  ),
)

function expectKnownFailure(error: unknown): void {
  if (!(error instanceof ShardflakeError)) {
    throw new Error(`Not a ShardflakeError: ${String(error)}`, { cause: error })
  }
  expect(KNOWN_CODES).toContain(error.code)
}

function attempt(work: () => unknown): void {
  try {
    work()
  } catch (error) {
    expectKnownFailure(error)
  }
}

async function attemptAsync(work: () => Promise<unknown>): Promise<void> {
  try {
    await work()
  } catch (error) {
    expectKnownFailure(error)
  }
}

/** `value` as JSON text when it has one, else itself. */
function asJson(value: unknown): unknown {
  try {
    return JSON.stringify(value) ?? value
  } catch {
    return value
  }
}

const anything = fc.anything({ withBigInt: true, withBoxedValues: true, withNullPrototype: true })
const shardLike = fc.oneof(
  fc.integer({ min: -5, max: 70 }),
  fc.double(),
  fc.bigInt({ min: -5n, max: 70n }),
  fc.string(),
  anything,
)
const entryLike = fc.oneof(
  fc.record({
    from: shardLike,
    to: shardLike,
    server: fc.oneof(fc.constantFrom('a', 'b', 'c', ''), anything),
    state: fc.oneof(fc.constantFrom('serving', 'switching', 'arriving', 'gone'), anything),
  }),
  anything,
)
const entriesLike = fc.oneof(fc.array(entryLike, { maxLength: 4 }), anything)

const map = new ShardMap(sharding, [
  { from: 0, to: 31, target: 'a' },
  { from: 32, to: 63, target: 'b' },
])
let homes: ShardHomes<string>
beforeAll(async () => {
  homes = await ShardHomes.open({ sharding, servers: { a: 'A', b: 'B' }, directory: map })
})
afterAll(() => homes.close())

describe('any input to shard homes works or fails typed', () => {
  it('ShardHomes.open', async () => {
    await fc.assert(
      fc.asyncProperty(
        anything,
        fc.record(
          {
            sharding: fc.oneof(fc.constant(sharding), anything),
            servers: fc.oneof(
              fc.constant({ a: 1, b: 2 }),
              fc.dictionary(fc.string(), anything),
              anything,
            ),
            directory: fc.oneof(
              fc.constant(map),
              entriesLike.map((entries) => {
                const directory = new MemoryDirectory(sharding, [
                  { from: 0, to: 63, server: 'a', state: 'serving' },
                ])
                directory.answer = {
                  ...directory.snapshot(),
                  entries: entries as core.DirectoryEntry[],
                }
                return directory
              }),
              anything,
            ),
            refreshMs: fc.oneof(fc.integer({ min: -10, max: 5000 }), anything),
            switchWaitMs: fc.oneof(fc.integer({ min: -10, max: 100 }), anything),
          },
          { requiredKeys: [] },
        ),
        async (raw, options) => {
          for (const input of [raw, options]) {
            await attemptAsync(async () => {
              const opened = await ShardHomes.open(input as never)
              await opened.close()
            })
          }
        },
      ),
      { numRuns: 300 },
    )
  })

  it('routing, grouping and guards', async () => {
    await fc.assert(
      fc.asyncProperty(
        shardLike,
        anything,
        fc.func(shardLike),
        async (value, other, anyShardOf) => {
          const shardOf = anyShardOf as (item: unknown) => number
          attempt(() => homes.serverOf(value as never))
          attempt(() => homes.forShard(value as never))
          attempt(() => homes.forId(value as never))
          attempt(() => homes.forKey(value as never))
          attempt(() => homes.handleOf(value as never))
          attempt(() => homes.checkHome(other as never, value as never))
          attempt(() => homes.groupByServer(other as never, shardOf))
          attempt(() => homes.groupByServer([value, other], shardOf))
          attempt(() => homes.groupByServer([value], other as never))
          await attemptAsync(() => homes.writeHome(value as never, other as never))
          attempt(() => homes.writeHomeNow(value as never, other as never))
          await attemptAsync(() => homes.writeGroups([value, other], shardOf, other as never))
          await attemptAsync(() => homes.refresh(other as never))
        },
      ),
      { numRuns: 300 },
    )
  })

  it('fanOut', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.func(fc.oneof(fc.array(anything), anything)), anything),
        fc.oneof(
          fc.record(
            {
              shards: fc.oneof(fc.constant('all'), fc.string(), fc.array(shardLike), anything),
              concurrency: fc.oneof(fc.integer({ min: -1, max: 5 }), anything),
              orderBy: fc.oneof(fc.func(fc.oneof(fc.bigInt(), fc.string(), anything)), anything),
              order: fc.oneof(fc.constantFrom('asc', 'desc'), anything),
              limit: fc.oneof(fc.integer({ min: -1, max: 5 }), anything),
              signal: fc.oneof(fc.constant(AbortSignal.abort()), anything),
            },
            { requiredKeys: [] },
          ),
          anything,
        ),
        async (run, options) => {
          const query = typeof run === 'function' ? async (...args: unknown[]) => run(...args) : run
          await attemptAsync(() => homes.fanOut(query as never, options as never))
        },
      ),
      { numRuns: 300 },
    )
  })

  it('directories and their building blocks', async () => {
    await fc.assert(
      fc.asyncProperty(entriesLike, anything, anything, anything, async (entries, a, b, c) => {
        attempt(() => checkDirectoryEntries(sharding, entries))
        attempt(() => new StaticDirectory(a as never))
        attempt(() => readMaxStaleMs(a as never))
        attempt(() => checkExpectedVersion(a))
        attempt(() =>
          toDirectorySnapshot(sharding, 'fuzz', {
            version: a,
            maxStaleMs: b,
            sharding: c,
            entries,
          }),
        )
        attempt(() =>
          toDirectorySnapshot(sharding, 'fuzz', {
            version: '1',
            maxStaleMs: 100,
            sharding: JSON.stringify(sharding.toJSON()),
            entries: asJson(entries),
          }),
        )
        const directory = new MemoryDirectory(sharding, [
          { from: 0, to: 63, server: 'a', state: 'serving' },
        ])
        await attemptAsync(() => directory.compareAndSet(a as never, entries as never))
        await attemptAsync(() => directory.compareAndSet(1n, entries as never))
      }),
      { numRuns: 1000 },
    )
  })
})
