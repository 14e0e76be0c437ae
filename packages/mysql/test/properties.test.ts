import {
  anyValue,
  constructAndClose,
  eachOptionReplaced,
  mangledOptions,
  outcomeOf,
  watchUnhandled,
} from '@shardflake/conformance'
import { defineSharding, type IdSource, instagram, PrefetchSource } from '@shardflake/core'
import fc from 'fast-check'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installMysql, installTicketServers, MysqlSource, TicketServerSource } from '../src'
import { createPool, dropDatabases, RUN } from './helpers'

/**
 * Whatever a caller passes to the sources' constructors and methods, the outcome is a result or a
 * `ShardflakeError` with a code, never another error, and no failure reaches the process later
 * (an unhandled rejection, an uncaught exception from a timer or an event). Against the real
 * server: shards 0-3 and a ticket sequence installed.
 */
const PREFIX = `sf_my_prop_${RUN}_`
const SHARDS = `${PREFIX}s_`
const TICKETS = `${PREFIX}tickets`
const sharding = defineSharding({ layout: instagram, logicalShards: 16 })
let pool: Pool

beforeAll(async () => {
  pool = createPool(undefined, { connectionLimit: 8 })
  await dropDatabases(pool, PREFIX)
  await installMysql(pool, { sharding, shards: '0-3', schemaPrefix: SHARDS })
  await installTicketServers({ servers: [pool], sequence: 'fuzz', database: TICKETS })
})
afterAll(async () => {
  await dropDatabases(pool, PREFIX)
  await pool.end()
})

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

describe('MysqlSource, TicketServerSource and PrefetchSource, any input', () => {
  it('the constructors: a source or a typed error', async () => {
    const unhandled = watchUnhandled()
    const mysqlOptions = {
      sharding,
      databases: pool,
      shards: '0-3',
      schemaPrefix: SHARDS,
      timeoutMs: 2000,
      maxWaitMs: 100,
      prefetch: { size: 10, maxAgeMs: 500 },
      useContextQuery: false,
    }
    const ticketOptions = {
      servers: [{ pool, offset: 1, database: TICKETS }],
      sequence: 'fuzz',
      database: TICKETS,
      increment: 1,
      useServerSettings: false,
      timeoutMs: 2000,
      retryAfterMs: 1000,
    }
    const codes = new Set<string>()
    const construct = async (mysql: unknown, tickets: unknown) => {
      codes.add(await constructAndClose(MysqlSource, mysql))
      codes.add(await constructAndClose(TicketServerSource, tickets))
    }
    await fc.assert(
      fc.asyncProperty(mangledOptions(mysqlOptions), mangledOptions(ticketOptions), construct),
      { numRuns: 300 },
    )
    for (const mysql of eachOptionReplaced(mysqlOptions)) await construct(mysql, ticketOptions)
    for (const tickets of eachOptionReplaced(ticketOptions)) await construct(mysqlOptions, tickets)
    expect(codes).toContain('ok')
    expect(codes).toContain('INVALID_ARGUMENT')
    await unhandled.check()
  })

  it('MysqlSource nextId and nextIds: IDs or a typed error, also on the caller connection and after close', async () => {
    const unhandled = watchUnhandled()
    const source = new MysqlSource({
      sharding,
      databases: pool,
      schemaPrefix: SHARDS,
      shards: '0-3',
      useContextQuery: (shard) => shard === 2,
    })
    const codes = await hammer(source, 400)
    expect(codes.get('ok')).toBeGreaterThan(0)
    for (const code of ['INVALID_ARGUMENT', 'SHARD_OUT_OF_RANGE', 'CANCELLED']) {
      expect(codes.has(code)).toBe(true)
    }
    await source.close()
    expect((await hammer(source, 50)).has('ok')).toBe(false)
    await unhandled.check()
  })

  it('MysqlSource with prefetch, and a PrefetchSource over it: IDs or a typed error', async () => {
    const unhandled = watchUnhandled()
    const buffered = new MysqlSource({
      sharding,
      databases: pool,
      schemaPrefix: SHARDS,
      shards: '0-3',
      prefetch: { size: 20 },
    })
    expect((await hammer(buffered, 300)).get('ok')).toBeGreaterThan(0)
    const wrapped = new PrefetchSource(buffered, { size: 5 })
    expect((await hammer(wrapped, 200)).get('ok')).toBeGreaterThan(0)
    await wrapped.close()
    await unhandled.check()
  })

  it('TicketServerSource nextId and nextIds: tickets or a typed error', async () => {
    const unhandled = watchUnhandled()
    const source = new TicketServerSource({
      servers: [pool],
      sequence: 'fuzz',
      database: TICKETS,
    })
    expect((await hammer(source, 300)).get('ok')).toBeGreaterThan(0)
    source.close()
    expect((await hammer(source, 50)).has('ok')).toBe(false)
    await unhandled.check()
  })
})
