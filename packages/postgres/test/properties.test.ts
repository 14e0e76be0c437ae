import {
  anyValue,
  constructAndClose,
  eachOptionReplaced,
  mangledOptions,
  outcomeOf,
  watchUnhandled,
} from '@shardflake/conformance'
import { type IdSource, PrefetchSource } from '@shardflake/core'
import fc from 'fast-check'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPostgres, PostgresSource } from '../src/index'
import { createDatabase, dropDatabase, sharding } from './helpers'

/**
 * Whatever a caller passes to the sources' constructors and methods, the outcome is a result or a
 * `ShardflakeError` with a code, never another error, and no failure reaches the process later
 * (an unhandled rejection, an uncaught exception from a timer or an event). Against a real
 * database, shards 0-3 installed.
 */
const DB = 'sf_pg_properties'
let url: string
let pool: pg.Pool

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 4 })
  pool.on('error', () => undefined)
  await installPostgres(pool, { sharding, shards: '0-3' })
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

/** Shards, counts and contexts a caller may pass: mostly near the valid ones, and anything. */
const shardArg = fc.oneof(fc.integer({ min: -2, max: 5 }), anyValue)
const countArg = fc.oneof(
  fc.integer({ min: -2, max: 40 }),
  fc.constantFrom(0, 1_000_001, 2e6, 1.5, Number.NaN),
  anyValue,
)
const contextArg = fc.oneof(
  fc.constant(undefined),
  fc.record({ signal: fc.oneof(fc.constant(AbortSignal.abort()), anyValue) }, { requiredKeys: [] }),
  fc.record({ query: fc.func(anyValue) }),
  anyValue,
)

/** Calls `nextId`/`nextIds` with every combination the arbitraries give, on `source`. */
async function hammer(source: IdSource, runs: number): Promise<Map<string, number>> {
  const codes = new Map<string, number>()
  await fc.assert(
    fc.asyncProperty(
      shardArg,
      countArg,
      contextArg,
      fc.boolean(),
      async (shard, count, context, one) => {
        const input = { shard, count, context, one }
        const outcome = await outcomeOf(
          () =>
            one
              ? Reflect.apply(source.nextId, source, [shard, context])
              : Reflect.apply(source.nextIds, source, [shard, count, context]),
          input,
        )
        codes.set(outcome, (codes.get(outcome) ?? 0) + 1)
      },
    ),
    { numRuns: runs },
  )
  return codes
}

describe('PostgresSource and PrefetchSource, any input', () => {
  it('the constructors: a source or a typed error', async () => {
    const unhandled = watchUnhandled()
    const valid = {
      sharding,
      databases: pool,
      shards: '0-3',
      schemaPrefix: 'shard_',
      schema: 'shardflake',
      timeoutMs: 2000,
      prefetch: { size: 10, maxAgeMs: 500 },
      useContextQuery: false,
    }
    const codes = new Set<string>()
    const validPrefetch = { size: 10, maxAgeMs: 100 }
    const construct = async (options: unknown, prefetch: unknown) => {
      codes.add(await constructAndClose(PostgresSource, options))
      const inner = new PostgresSource({ sharding, databases: pool })
      codes.add(
        await outcomeOf(() => Reflect.construct(PrefetchSource, [inner, prefetch]), prefetch),
      )
      codes.add(
        await outcomeOf(() => Reflect.construct(PrefetchSource, [options, prefetch]), options),
      )
      await inner.close()
    }
    await fc.assert(
      fc.asyncProperty(mangledOptions(valid), mangledOptions(validPrefetch), construct),
      { numRuns: 300 },
    )
    for (const options of eachOptionReplaced(valid)) await construct(options, validPrefetch)
    for (const prefetch of eachOptionReplaced(validPrefetch)) await construct(valid, prefetch)
    expect(codes).toContain('ok')
    expect(codes).toContain('INVALID_ARGUMENT')
    await unhandled.check()
  })

  it('nextId and nextIds: IDs or a typed error, also on the caller connection and after close', async () => {
    const unhandled = watchUnhandled()
    const source = new PostgresSource({
      sharding,
      databases: pool,
      timeoutMs: 2000,
      useContextQuery: (shard) => shard === 2,
    })
    const codes = await hammer(source, 400)
    expect(codes.get('ok')).toBeGreaterThan(0)
    for (const code of ['INVALID_ARGUMENT', 'SHARD_OUT_OF_RANGE', 'CANCELLED']) {
      expect(codes.has(code)).toBe(true)
    }
    await source.close()
    const closed = await hammer(source, 50)
    expect(closed.has('ok')).toBe(false)
    await unhandled.check()
  })

  it('PrefetchSource over it: IDs or a typed error', async () => {
    const unhandled = watchUnhandled()
    const source = new PrefetchSource(new PostgresSource({ sharding, databases: pool }), {
      size: 20,
    })
    const codes = await hammer(source, 400)
    expect(codes.get('ok')).toBeGreaterThan(0)
    await source.close()
    await hammer(source, 50)
    await unhandled.check()
  })
})
