import { startMariadb, type ThrowawayServer } from '@shardflake/conformance'
import { installTicketServers, TicketServerSource } from '@shardflake/mysql'
import { afterAll, beforeAll, expect, inject, test } from 'vitest'
import { checkScenario } from '../src/check'
import {
  countPresentRows,
  killSessions,
  mysqlPool,
  mysqlRowWriter,
  prepareServer,
  SOURCE_USER,
} from '../src/mysql'
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
  const admins = [mysqlPool(first.port), mysqlPool(second.port)]
  await Promise.all(admins.map((admin) => prepareServer(admin)))
  const servers = [mysqlPool(first.port, SOURCE_USER, 8), mysqlPool(second.port, SOURCE_USER, 8)]
  await installTicketServers({ servers: admins, sequence: 'faults' })

  const scenario = new Scenario('tickets')
  const source = new TicketServerSource({
    servers,
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
  const writerPool = mysqlPool(first.port, 'root', 3)
  const committed: bigint[] = []
  const uncertain = { n: 0 }
  const rowsLedger = scenario.ledger('TicketServerSource (rows)', 'tickets')
  scenario.load({
    ledger: rowsLedger,
    source,
    shards: [0],
    callers: 2,
    counts: [20, 50],
    onIds: mysqlRowWriter(writerPool, committed, uncertain),
  })
  const control = scenario.control(SHARDS.ticketsControl)
  for (const admin of admins) killSessions(scenario, admin, 80, 300)

  const stopWindow = async (server: ThrowawayServer, ms: number) => {
    await server.kill('SIGSTOP')
    scenario.faults.add(`SIGSTOP ${ms / 1000} s`)
    ledger.openWindow(`${server.name} stopped`)
    try {
      await sleep(ms)
    } finally {
      await server.kill('SIGCONT')
      ledger.closeWindow()
    }
  }
  const crash = async (server: ThrowawayServer) => {
    await server.kill('SIGKILL')
    scenario.faults.add('kill -9 mariadbd')
    await sleep(500)
    await server.restart()
    scenario.faults.add('restart')
  }

  await sleep(2_000)
  await stopWindow(first, 6_000)
  await sleep(2_000)
  await crash(second)
  await sleep(2_000)
  await stopWindow(second, 4_000)
  await sleep(2_000)
  await crash(first)
  await sleep(3_000)
  await scenario.stop()

  const present = await countPresentRows(admins[0]!, committed)
  scenario.rows['faults.rows (ticket server 1, InnoDB)'] = {
    committed: committed.length,
    lost: committed.length - present,
    uncertain: uncertain.n,
  }
  const figures = scenario.save(inject('runDir'))
  await Promise.all([source.close(), control.close()])
  await Promise.all([...servers, ...admins, writerPool].map((pool) => pool.end()))

  checkScenario(figures)
  expect(figures.faults['kill -9 mariadbd']).toBe(2)
  // While one server was stopped, the other served callers (counts only; times are reported).
  for (const window of ledger.figures().windows) {
    expect(window.ids, `tickets during "${window.name}"`).toBeGreaterThan(0)
  }
})
