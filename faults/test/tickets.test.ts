import { startMariadb, type ThrowawayServer } from '@shardflake/conformance'
import { installTicketServers, TicketServerSource } from '@shardflake/mysql'
import { afterAll, beforeAll, expect, inject, test } from 'vitest'
import { killSessions, mariadbPools, mysqlRows } from '../src/mysql'
import { Scenario, SHARDS, sleep } from '../src/scenario'

let first: ThrowawayServer
let second: ThrowawayServer

beforeAll(async () => {
  const options = { durable: true, maxConnections: 300 }
  ;[first, second] = await Promise.all([
    startMariadb({ ...options, name: 'tickets-1' }),
    startMariadb({ ...options, name: 'tickets-2' }),
  ])
})

afterAll(async () => {
  await Promise.all([first?.stop(), second?.stop()])
})

const TIMEOUT_MS = 500

test('TicketServerSource with two MariaDB ticket servers: each stopped (SIGSTOP), each killed -9, sessions killed', async () => {
  const pools = await Promise.all([mariadbPools(first.port), mariadbPools(second.port)])
  await installTicketServers({ servers: pools.map((pool) => pool.admin), sequence: 'faults' })

  const scenario = new Scenario('tickets')
  const source = new TicketServerSource({
    servers: pools.map((pool) => pool.source),
    sequence: 'faults',
    timeoutMs: TIMEOUT_MS,
    retryAfterMs: 1_000,
  })
  const ledger = scenario.ledger('TicketServerSource', 'tickets')
  scenario.load({
    ledger,
    source,
    shards: [0],
    callers: 8,
    counts: [1, 10, 100, 1000, 3],
    abortEvery: 97,
    abortAfterMs: 2,
  })
  // Tickets written as rows on the first server, which is stopped and killed.
  const rowsLedger = scenario.ledger('TicketServerSource (rows)', 'tickets')
  scenario.load({
    ledger: rowsLedger,
    source,
    shards: [0],
    callers: 2,
    counts: [20, 50],
    onIds: mysqlRows(scenario, pools[0], 'faults.rows (ticket server 1, InnoDB)'),
  })
  scenario.control(SHARDS.ticketsControl)
  for (const { admin } of pools) killSessions(scenario, admin, 80, 300)

  await sleep(2_000)
  await scenario.pause(first, 6_000, [ledger])
  await sleep(2_000)
  await scenario.crash([second], 500)
  await sleep(2_000)
  await scenario.pause(second, 4_000, [ledger])
  await sleep(2_000)
  await scenario.crash([first], 500)
  await sleep(3_000)
  const figures = await scenario.finish(inject('runDir'), pools)
  expect(figures.faults['kill -9 mariadb']).toBe(2)
  // While one server was stopped, the other served callers (counts only; times are reported).
  for (const window of ledger.figures().windows) {
    expect(window.ids, `tickets during "${window.name}"`).toBeGreaterThan(0)
  }
})
