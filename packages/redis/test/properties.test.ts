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
import { describe, expect, it } from 'vitest'
import { RedisSource } from '../src'
import { sharding, testFixture } from './helpers'
import { runTag, sharedRedisUrl } from './redis-servers'

/**
 * Whatever a caller passes to the source's constructor and methods, the outcome is a result or a
 * `ShardflakeError` with a code, never another error, and no failure reaches the process later
 * (an unhandled rejection, an uncaught exception from a client's event). Against the shared Redis.
 */
const prefix = `sf:redis:properties:${runTag}:`
const fixture = testFixture(() => ({ sharding, servers: sharedRedisUrl, keyPrefix: prefix }))
fixture.deleteAfter(() => sharedRedisUrl, prefix)

const shardArg = fc.oneof(fc.integer({ min: -2, max: 2001 }), anyValue)
const countArg = fc.oneof(
  fc.integer({ min: -2, max: 40 }),
  fc.constantFrom(0, 1_000_001, 2e6, 1.5, Number.NaN),
  anyValue,
)
const contextArg = fc.oneof(
  fc.constant(undefined),
  fc.record({ signal: fc.oneof(fc.constant(AbortSignal.abort()), anyValue) }, { requiredKeys: [] }),
  anyValue,
)

async function hammer(source: IdSource, runs: number): Promise<Map<string, number>> {
  const codes = new Map<string, number>()
  await fc.assert(
    fc.asyncProperty(
      shardArg,
      countArg,
      contextArg,
      fc.boolean(),
      async (shard, count, context, one) => {
        const outcome = await outcomeOf(
          () =>
            one
              ? Reflect.apply(source.nextId, source, [shard, context])
              : Reflect.apply(source.nextIds, source, [shard, count, context]),
          { shard, count, context, one },
        )
        codes.set(outcome, (codes.get(outcome) ?? 0) + 1)
      },
    ),
    { numRuns: runs },
  )
  return codes
}

describe('RedisSource, any input', () => {
  it('the constructor: a source or a typed error', async () => {
    const unhandled = watchUnhandled()
    const valid = {
      sharding,
      servers: [sharedRedisUrl],
      keyPrefix: prefix,
      maxDriftMs: 1000,
      maxWaitMs: 100,
      timeoutMs: 2000,
      retryAfterMs: 1000,
      strategy: 'failover',
    }
    const codes = new Set<string>()
    const construct = async (options: unknown) => {
      codes.add(await constructAndClose(RedisSource, options))
    }
    await fc.assert(fc.asyncProperty(mangledOptions(valid), construct), { numRuns: 300 })
    for (const options of eachOptionReplaced(valid)) await construct(options)
    expect(codes).toContain('ok')
    expect(codes).toContain('INVALID_ARGUMENT')
    await unhandled.check()
  })

  it('nextId and nextIds, and a PrefetchSource over it: IDs or a typed error, also after close', async () => {
    const unhandled = watchUnhandled()
    const source = fixture.source()
    const codes = await hammer(source, 400)
    expect(codes.get('ok')).toBeGreaterThan(0)
    for (const code of ['INVALID_ARGUMENT', 'SHARD_OUT_OF_RANGE', 'CANCELLED']) {
      expect(codes.has(code)).toBe(true)
    }
    const wrapped = new PrefetchSource(fixture.source(), { size: 10 })
    expect((await hammer(wrapped, 200)).get('ok')).toBeGreaterThan(0)
    await source.close()
    await wrapped.close()
    expect((await hammer(source, 50)).has('ok')).toBe(false)
    await unhandled.check()
  })
})
