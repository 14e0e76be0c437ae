import { redisCommand, startRedis, type ThrowawayServer } from '@shardflake/conformance'
import { RedisSource } from '@shardflake/redis'
import { afterAll, beforeAll, expect, inject, test } from 'vitest'
import { Scenario, SHARDS, sharding, sleep } from '../src/scenario'

let first: ThrowawayServer
let second: ThrowawayServer

beforeAll(async () => {
  ;[first, second] = await Promise.all([
    startRedis({ name: 'redis-1' }),
    startRedis({ name: 'redis-2' }),
  ])
})

afterAll(async () => {
  await Promise.all([first?.stop(), second?.stop()])
})

const TIMEOUT_MS = 500

test('RedisSource with two servers: one stopped (SIGSTOP), each killed and restarted empty, both killed', async () => {
  const scenario = new Scenario('redis')
  const servers = [first.url, second.url]
  const failover = new RedisSource({
    sharding,
    servers,
    timeoutMs: TIMEOUT_MS,
    retryAfterMs: 1_000,
  })
  const roundRobin = new RedisSource({
    sharding,
    servers,
    strategy: 'round-robin',
    timeoutMs: TIMEOUT_MS,
    retryAfterMs: 1_000,
  })
  const failoverLedger = scenario.ledger('RedisSource (failover)')
  const roundRobinLedger = scenario.ledger('RedisSource (round-robin)')
  const shards = SHARDS.redis
  for (const [ledger, source] of [
    [failoverLedger, failover],
    [roundRobinLedger, roundRobin],
  ] as const) {
    scenario.load({
      ledger,
      source,
      shards,
      callers: 4,
      counts: [1, 10, 100, 500, 5],
      abortEvery: 101,
      abortAfterMs: 1,
    })
  }
  scenario.control(SHARDS.redisControl)

  const ledgers = [failoverLedger, roundRobinLedger]

  await sleep(2_000)
  await scenario.pause(first, 6_000, ledgers) // the server the failover source uses
  await sleep(2_000)
  // A restarted Redis server is empty: every counter gone.
  await scenario.crash([first], 1_000)
  await sleep(1_000)
  // Every counter of the first server gone while it is in use (FLUSHALL).
  await redisCommand(first.port, ['FLUSHALL'])
  scenario.faults.add('FLUSHALL')
  await sleep(1_000)
  await scenario.pause(second, 4_000, ledgers)
  await sleep(2_000)
  await scenario.crash([second], 1_000)
  await sleep(2_000)
  await scenario.crash([first, second], 1_000)
  await sleep(3_000)
  await scenario.finish(inject('runDir'))
  // While one server was stopped, the other served callers (counts only; times are reported).
  for (const ledger of ledgers) {
    for (const window of ledger.figures().windows) {
      expect(window.ids, `${ledger.source} during "${window.name}"`).toBeGreaterThan(0)
    }
  }
})
