/**
 * Whatever a caller passes to core's public constructors and functions, the outcome is a result or
 * a `ShardflakeError` with a known code: never a TypeError or RangeError from deep inside, never a
 * hang, and no failure reaches the process later (a rejected promise, a timer that throws).
 * Seeded, with bounded runs, so CI sees the same inputs every time.
 */
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { anyValue, mangledOptions, outcomeOf, watchUnhandled } from '../../conformance/src/fuzz'
import * as core from '../src'
import {
  allocateIds,
  checkContext,
  checkShardRule,
  defineLayout,
  defineSharding,
  type FieldName,
  fnv1a32,
  formatShardList,
  hashShard,
  InProcessSource,
  instagram,
  integerShard,
  type Layout,
  LeasedSource,
  MemoryLeaseRegistry,
  PrefetchSource,
  parseInstant,
  parseShardRanges,
  presets,
  RoutedSource,
  readDuration,
  readInteger,
  readShardList,
  ShardflakeError,
  ShardMap,
  StaticDirectory,
  shardForKey,
  stringifyIds,
  toBigInt,
  withDeadline,
  workerFromEnvironment,
} from '../src'

/** Every code of every error class core exports. */
const KNOWN_CODES = new Set(
  Object.values(core as Record<string, unknown>).flatMap((value) =>
    typeof value === 'function' && value.prototype instanceof ShardflakeError
      ? [(value as typeof ShardflakeError).code]
      : [],
  ),
)

/** Same inputs on every run; bounded so the file stays fast. */
const RUNS = {
  seed: Number(process.env.FUZZ_SEED ?? 0x5eed),
  numRuns: Number(process.env.FUZZ_RUNS ?? 250),
}

/** Runs `work` (sync or async) and records its outcome: 'ok' or a known code, else the test fails. */
async function outcome(codes: Map<string, number>, work: () => unknown, input: unknown) {
  const result = await outcomeOf(work, input)
  if (result !== 'ok')
    expect(KNOWN_CODES, `code ${result} for ${fc.stringify(input)}`).toContain(result)
  codes.set(result, (codes.get(result) ?? 0) + 1)
  return result
}

/** Near-valid numbers, and anything. */
const smallInt = fc.oneof(fc.integer({ min: -3, max: 70 }), anyValue)
const timeLike = fc.oneof(
  fc.integer({ min: 0, max: 4_000_000_000_000 }),
  fc.double(),
  fc.date(),
  fc.constantFrom(1e20, 1e21, -1, 8.64e15, new Date(Number.NaN)),
  anyValue,
)
const idLike = fc.oneof(
  fc.bigInt({ min: -(1n << 63n), max: (1n << 64n) - 1n }),
  fc.bigInt().map(String),
  fc.constantFrom('-1', '18446744073709551615', '18446744073709551616', ' 5 ', '1e3', '0x10'),
  anyValue,
)

const validLayout = {
  name: 'fuzz',
  epoch: '2020-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  workerBits: 0,
  sequenceBits: 10,
  timeUnitMs: 1,
  order: ['time', 'shard', 'worker', 'sequence'] as FieldName[],
  allowSignBit: false,
  decodeOnly: false,
}
/** Widths near the limits (sums above 64, 31-bit fields) as well as mangled options. */
const layoutOptions = fc.oneof(
  mangledOptions(validLayout),
  fc.record({
    epoch: fc.oneof(
      fc.integer({ min: 0, max: Date.now() }),
      fc.constantFrom('2020', '2020-02-30', 'x 1', 'hello 2020', '2020-01-01T00:00:00+02:00'),
      fc.string(),
    ),
    timeBits: fc.integer({ min: 0, max: 64 }),
    shardBits: fc.integer({ min: 0, max: 32 }),
    workerBits: fc.integer({ min: 0, max: 32 }),
    sequenceBits: fc.integer({ min: 0, max: 32 }),
    timeUnitMs: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 1e12 })),
    allowSignBit: fc.boolean(),
  }),
)

describe('layouts, any input', () => {
  it('defineLayout: a layout whose every instant is a valid Date, or INVALID_LAYOUT', async () => {
    const codes = new Map<string, number>()
    await fc.assert(
      fc.asyncProperty(layoutOptions, async (options) => {
        let layout: Layout | undefined
        const result = await outcome(
          codes,
          () => {
            layout = defineLayout(options as never)
          },
          options,
        )
        if (result !== 'ok') {
          expect(result).toBe('INVALID_LAYOUT')
          return
        }
        expect(Number.isFinite(layout!.timeEndsAt.getTime())).toBe(true)
        expect(layout!.toJSON().timeEndsAt).toBe(layout!.timeEndsAt.toISOString())
      }),
      { ...RUNS, numRuns: 600 },
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
    expect(codes.get('INVALID_LAYOUT')).toBeGreaterThan(0)
  })

  it('compose, decompose, shardOf, timeOf, toSigned, toUnsigned, timeAt, composeTime, checkShard, checkTime, checkGenerating', async () => {
    const codes = new Map<string, number>()
    const layouts = Object.values(presets)
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...layouts),
        fc.oneof(
          fc.record({
            timestamp: timeLike,
            shard: smallInt,
            sequence: smallInt,
            worker: fc.oneof(fc.constant(undefined), smallInt),
          }),
          anyValue,
        ),
        idLike,
        timeLike,
        smallInt,
        async (layout, parts, id, time, small) => {
          const input = { layout: layout.name, parts, id, time, small }
          const composed = await outcome(codes, () => layout.compose(parts as never), input)
          if (composed === 'ok') {
            const made = layout.compose(parts as never)
            const { shard, sequence } = parts as { shard: number; sequence: number }
            // -0 composes as 0 (`+ 0` turns -0 into 0; toMatchObject compares by Object.is).
            expect(layout.decompose(made)).toMatchObject({
              shard: shard + 0,
              sequence: sequence + 0,
              id: made,
            })
          }
          const decoded = await outcome(codes, () => layout.decompose(id as never), input)
          if (decoded === 'ok') {
            expect(Number.isFinite(layout.decompose(id as never).timestamp.getTime())).toBe(true)
          }
          for (const call of [
            () => layout.shardOf(id as never),
            () => layout.timeOf(id as never),
            () => layout.toSigned(id as never),
            () => layout.toUnsigned(id as never),
            () => layout.timeAt(time as never),
            () => layout.timeAt(time as never, true),
            () => layout.composeTime(small as never, 0, 0, 0),
            () => layout.composeTime(0, small as never, 0, 0),
            () => layout.checkShard(small as never),
            () => layout.checkTime(small as never),
            () => layout.checkGenerating(time as never, small as never),
            () => layout.equals(parts as never),
          ]) {
            await outcome(codes, call, input)
          }
        },
      ),
      RUNS,
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
  })

  it('idRange: min <= max, both IDs of the layout, or a typed refusal', async () => {
    const codes = new Map<string, number>()
    const signed = defineLayout({ ...validLayout, epoch: 0, allowSignBit: true, name: 'signed' })
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(instagram, signed, presets.sonyflake, presets.discord),
        timeLike,
        timeLike,
        async (layout, from, to) => {
          const input = { layout: layout.name, from, to }
          const result = await outcome(
            codes,
            () => layout.idRange(from as never, to as never),
            input,
          )
          if (result !== 'ok') return
          const { min, max } = layout.idRange(from as never, to as never)
          expect(min <= max, fc.stringify(input)).toBe(true)
          // Both ends decode, and carry times the layout can hold.
          expect(layout.decompose(min).time).toBeLessThanOrEqual(layout.decompose(max).time)
          expect(layout.decompose(max).time).toBeLessThan(layout.timeLimit)
        },
      ),
      { ...RUNS, numRuns: 500 },
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
    expect(codes.get('INVALID_ARGUMENT')).toBeGreaterThan(0)
  })

  it('parseInstant reads ISO-8601 only', () => {
    expect(parseInstant('2025-01-01')).toBe(Date.UTC(2025, 0, 1))
    expect(parseInstant('2025-01-01T02:00:00+02:00')).toBe(Date.UTC(2025, 0, 1))
    expect(parseInstant('2025-01-01T00:00:00.250Z')).toBe(Date.UTC(2025, 0, 1) + 250)
    for (const text of ['x 1', 'hello 2020', '2020', '2025-02-30', 'Jan 1 2020', '']) {
      expect(parseInstant(text), text).toBeUndefined()
    }
    fc.assert(
      fc.property(fc.oneof(fc.string(), anyValue), (text) => {
        const ms = parseInstant(text as string)
        if (ms !== undefined) expect(Number.isFinite(ms)).toBe(true)
      }),
      RUNS,
    )
  })
})

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })

describe('sharding, keys, shard lists and maps, any input', () => {
  it('defineSharding and its methods', async () => {
    const codes = new Map<string, number>()
    const bigLayout = defineLayout({ epoch: 0, timeBits: 22, shardBits: 31, sequenceBits: 10 })
    await fc.assert(
      fc.asyncProperty(
        mangledOptions({ layout: instagram, logicalShards: 64 }),
        fc.oneof(fc.bigInt(), fc.string(), fc.integer(), anyValue),
        fc.oneof(fc.constantFrom('auto', 'hash'), anyValue),
        idLike,
        fc.oneof(
          fc.record({ shardBy: fc.oneof(fc.constant('k'), anyValue) }),
          fc.record({ sameShardAs: fc.oneof(fc.constant('k'), anyValue) }),
          fc.record({ shard: smallInt }),
          anyValue,
        ),
        fc.oneof(fc.record({ k: anyValue }), anyValue),
        async (options, key, mode, id, rule, entity) => {
          const input = { options, key, mode, id, rule, entity }
          await outcome(codes, () => defineSharding(options as never), input)
          await outcome(
            codes,
            () => defineSharding({ layout: bigLayout, logicalShards: options as never }),
            input,
          )
          for (const call of [
            () => sharding.shardForKey(key as never, mode as never),
            () => sharding.shardOfId(id as never),
            () => sharding.checkShard(key as never),
            () => sharding.equals(options as never),
            () => sharding.checkSame(options as never, 'the other'),
            () => sharding.resolveShard(rule as never, entity, 'Post'),
            () => checkShardRule(rule, 'Post'),
            () => checkShardRule(rule, 'Post', ['nullable']),
            () => shardForKey(key as never, options as never, mode as never),
            () => integerShard(key as never, 64),
            () => hashShard(key as never, 64),
            () => fnv1a32(key as never),
            () => toBigInt(id),
            () => stringifyIds(entity),
            () => workerFromEnvironment(sharding, entity as never),
          ]) {
            await outcome(codes, call, input)
          }
        },
      ),
      RUNS,
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
  })

  it('readShardList, parseShardRanges, formatShardList: a list or a typed error, fast on huge ranges', async () => {
    const codes = new Map<string, number>()
    const wide = defineSharding({
      layout: defineLayout({ epoch: 0, timeBits: 22, shardBits: 31, sequenceBits: 10 }),
      logicalShards: 2 ** 31,
    })
    const listLike = fc.oneof(
      fc.constantFrom('all', '0-20000000', '0-3,2-5', '5-1', '1,,2', '0-2147483647'),
      fc.array(smallInt, { maxLength: 6 }),
      fc.record({ from: smallInt, to: smallInt }),
      fc.string(),
      anyValue,
    )
    await fc.assert(
      fc.asyncProperty(
        listLike,
        fc.oneof(fc.constantFrom(sharding, wide), anyValue),
        async (list, target) => {
          const input = { list, target }
          const result = await outcome(
            codes,
            () => readShardList(list as never, target as never),
            input,
          )
          if (result === 'ok') {
            const shards = readShardList(list as never, target as never)
            expect(shards.length).toBeLessThanOrEqual(core.MAX_LISTED_SHARDS)
            expect(readShardList(formatShardList(shards), target as never)).toEqual(shards)
          }
          await outcome(codes, () => parseShardRanges(list as never), input)
          await outcome(codes, () => formatShardList(list as never), input)
        },
      ),
      RUNS,
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
    expect(codes.get('SHARD_OUT_OF_RANGE')).toBeGreaterThan(0)
  })

  it('ShardMap, RoutedSource and StaticDirectory', async () => {
    const codes = new Map<string, number>()
    const unhandled = watchUnhandled()
    const rangeLike = fc.oneof(
      fc.record({ from: smallInt, to: smallInt, target: fc.oneof(fc.constant('a'), anyValue) }),
      anyValue,
    )
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.array(rangeLike, { maxLength: 4 }), anyValue),
        fc.oneof(fc.constant(sharding), anyValue),
        smallInt,
        idLike,
        async (ranges, target, shard, id) => {
          const input = { ranges, target, shard, id }
          let map: ShardMap<unknown> | undefined
          const made = await outcome(
            codes,
            () => {
              map = new ShardMap(target as never, ranges as never)
            },
            input,
          )
          if (made === 'ok' && map) {
            await outcome(codes, () => map!.targetFor(shard as never), input)
            await outcome(codes, () => map!.targetForId(id as never), input)
            await outcome(codes, () => map!.has(shard as never), input)
            await outcome(codes, async () => new StaticDirectory(map as never).read(), input)
          }
          await outcome(codes, () => ShardMap.single(target as never, 'a', shard as never), input)
          await outcome(codes, () => new StaticDirectory(ranges as never), input)
          await outcome(codes, () => new RoutedSource(target as never, ranges as never), input)
        },
      ),
      RUNS,
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
    await unhandled.check()
  })
})

describe('sources, any input', () => {
  /** A layout of its own, so the in-process claims of this file meet no other test's. */
  const own = defineSharding({
    layout: defineLayout({ ...validLayout, name: 'fuzz-sources', epoch: '2020-06-01' }),
    logicalShards: 64,
  })
  const contextLike = fc.oneof(
    fc.constant(undefined),
    fc.record(
      {
        signal: fc.oneof(fc.constant(AbortSignal.abort()), anyValue),
        query: fc.oneof(fc.func(anyValue), anyValue),
      },
      { requiredKeys: [] },
    ),
    anyValue,
  )
  const countLike = fc.oneof(fc.integer({ min: -2, max: 3000 }), anyValue)
  const opened: { close(): unknown }[] = []
  afterAll(async () => {
    for (const source of opened) await source.close()
  })

  it('InProcessSource: constructor, nextId, nextIds', async () => {
    const codes = new Map<string, number>()
    const unhandled = watchUnhandled()
    const valid = {
      sharding: own,
      shards: [0, 1, 2, 3],
      maxDriftMs: 10,
      maxWaitMs: 20,
      startAfterMs: 0,
      clock: Date.now,
    }
    await fc.assert(
      fc.asyncProperty(
        mangledOptions(valid),
        smallInt,
        countLike,
        contextLike,
        async (options, shard, count, context) => {
          const input = { options, shard, count, context }
          let source: InProcessSource | undefined
          await outcome(
            codes,
            () => {
              source = new InProcessSource(options as never)
            },
            input,
          )
          if (!source) return
          try {
            await outcome(codes, () => source!.nextId(shard as never, context as never), input)
            await outcome(
              codes,
              () => source!.nextIds(shard as never, count as never, context as never),
              input,
            )
          } finally {
            source.close()
          }
        },
      ),
      RUNS,
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
    expect(codes.get('INVALID_ARGUMENT')).toBeGreaterThan(0)
    await unhandled.check()
  })

  it('a huge layout is refused by size, at once, never filling the memory', async () => {
    const huge = defineSharding({
      layout: defineLayout({
        epoch: '2026-01-01',
        timeBits: 22,
        timeUnitMs: 1_000_000,
        shardBits: 31,
        sequenceBits: 10,
      }),
      logicalShards: 2 ** 31,
    })
    for (const shards of ['all', { from: 0, to: 2 ** 31 - 1 }] as const) {
      expect(() => new InProcessSource({ sharding: huge, shards })).toThrow(
        expect.objectContaining({
          code: 'INVALID_ARGUMENT',
          message: expect.stringMatching(/at most 1048576/),
        }),
      )
    }
    expect(() => readShardList('all', huge)).toThrow(/at most 1048576 can be listed/)
    // A 31-bit sequence works without a table of 2^31 values.
    const wideSequence = defineSharding({
      layout: defineLayout({
        epoch: Date.now() - 1000,
        timeBits: 31,
        shardBits: 1,
        sequenceBits: 31,
        timeUnitMs: 1000,
        name: 'wide-sequence',
      }),
      logicalShards: 2,
    })
    const source = new InProcessSource({ sharding: wideSequence, shards: 'all' })
    const ids = source.nextIds(1, 3)
    expect(ids.map((id) => wideSequence.layout.decompose(id).sequence)).toEqual([0, 1, 2])
    source.close()
  })

  it('PrefetchSource and allocateIds', async () => {
    const codes = new Map<string, number>()
    const unhandled = watchUnhandled()
    const inner = new InProcessSource({ sharding: own, shards: { from: 10, to: 20 } })
    opened.push(inner)
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constant(inner), anyValue),
        mangledOptions({ size: 10, maxAgeMs: 100 }),
        fc.oneof(fc.array(fc.integer({ min: 8, max: 22 }), { maxLength: 5 }), anyValue),
        contextLike,
        fc.oneof(fc.constant(undefined), mangledOptions({ singleNextId: true })),
        async (source, options, shards, context, allocate) => {
          const input = { source, options, shards, context, allocate }
          let prefetch: PrefetchSource | undefined
          await outcome(
            codes,
            () => {
              prefetch = new PrefetchSource(source as never, options as never)
            },
            input,
          )
          await outcome(
            codes,
            () =>
              allocateIds(source as never, shards as never, context as never, allocate as never),
            input,
          )
          if (prefetch) {
            // Not closed: closing would close the shared inner source.
            await outcome(
              codes,
              () => allocateIds(prefetch!, shards as never, context as never),
              input,
            )
          }
          await outcome(codes, () => checkContext(context, 'the call'), input)
        },
      ),
      RUNS,
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
    await unhandled.check()
  })

  it('LeasedSource.start and MemoryLeaseRegistry options', async () => {
    const codes = new Map<string, number>()
    const unhandled = watchUnhandled()
    const workers = defineSharding({
      layout: defineLayout({
        ...validLayout,
        name: 'fuzz-leases',
        epoch: '2020-07-01',
        shardBits: 8,
        workerBits: 4,
        sequenceBits: 8,
      }),
      logicalShards: 16,
    })
    const registry = new MemoryLeaseRegistry()
    await fc.assert(
      fc.asyncProperty(
        mangledOptions({
          sharding: workers,
          registry,
          holder: 'fuzz',
          ttlMs: 1000,
          maxStartWaitMs: 100,
          maxDriftMs: 10,
          maxWaitMs: 20,
        }),
        mangledOptions({ maxTtlMs: 10_000 }),
        smallInt,
        contextLike,
        async (options, registryOptions, shard, context) => {
          const input = { options, registryOptions, shard, context }
          await outcome(codes, () => new MemoryLeaseRegistry(registryOptions as never), input)
          let source: LeasedSource | undefined
          await outcome(
            codes,
            async () => {
              source = await LeasedSource.start(options as never)
            },
            input,
          )
          if (!source) return
          try {
            await outcome(codes, () => source!.nextId(shard as never, context as never), input)
          } finally {
            await source.close()
          }
        },
      ),
      { ...RUNS, numRuns: 120 },
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
    await unhandled.check()
  })

  it('withDeadline, readDuration, readInteger: typed up front, nothing fails later', async () => {
    const codes = new Map<string, number>()
    const unhandled = watchUnhandled()
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.constant(async () => 1),
          fc.constant(() => new Promise((resolve) => setTimeout(resolve, 5))),
          anyValue,
        ),
        mangledOptions({ timeoutMs: 1, what: 'the test', signal: new AbortController().signal }),
        anyValue,
        async (work, options, value) => {
          const input = { work, options, value }
          await outcome(codes, () => withDeadline(work as never, options as never), input)
          await outcome(codes, () => readDuration('x', value as never, 1), input)
          await outcome(codes, () => readInteger('x', value as never, 1, { min: 0, max: 9 }), input)
        },
      ),
      RUNS,
    )
    expect(codes.get('ok')).toBeGreaterThan(0)
    await unhandled.check(300)
  })
})

describe('refused up front, typed', () => {
  const sharding = defineSharding({
    layout: defineLayout({ ...validLayout, name: 'fuzz-upfront', epoch: '2020-08-01' }),
    logicalShards: 8,
  })

  it('a signal that is not an AbortSignal, startAfterMs NaN, a missing ShardMap or list', () => {
    const source = new InProcessSource({ sharding, shards: 'all' })
    try {
      for (const signal of [{}, 'x', { aborted: true }]) {
        expect(() => source.nextId(1, { signal } as never)).toThrow(
          expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
        )
        expect(() => source.nextIds(1, 2, { signal } as never)).toThrow(/must be an AbortSignal/)
        expect(() => checkContext({ signal }, 'x')).toThrow(/must be an AbortSignal/)
      }
      expect(() =>
        withDeadline(async () => 1, { timeoutMs: 10, what: 'x', signal: {} as never }),
      ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }))
    } finally {
      source.close()
    }
    expect(() => new InProcessSource({ sharding, shards: [5], startAfterMs: Number.NaN })).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/startAfterMs/),
      }),
    )
    expect(() => new ShardMap(sharding, null as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    )
    expect(() => readShardList('0-20000000', undefined as never)).toThrow(
      /needs the application's sharding/,
    )
    expect(() => readShardList('0-2', instagram as never)).toThrow(
      /needs the application's sharding/,
    )
    expect(() => allocateIds(source, null as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    )
    expect(() => new PrefetchSource(undefined as never, { size: 1 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    )
  })
})
