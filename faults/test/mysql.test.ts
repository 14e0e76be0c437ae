import { startMariadb, type ThrowawayServer } from '@shardflake/conformance'
import { installMysql, MysqlSource } from '@shardflake/mysql'
import { afterAll, beforeAll, expect, inject, test } from 'vitest'
import { checkScenario } from '../src/check'
import type { Ledger } from '../src/ledger'
import {
  countPresentRows,
  killSessions,
  mysqlPool,
  mysqlRowWriter,
  prepareServer,
  SOURCE_USER,
  sourceUrl,
} from '../src/mysql'
import { Scenario, SHARDS, sharding, shardList, sleep } from '../src/scenario'

let server: ThrowawayServer

beforeAll(async () => {
  server = await startMariadb({ durable: true, maxConnections: 300 })
})

afterAll(async () => {
  await server?.stop()
})

test('MysqlSource on MariaDB under kill -9 and restarts, KILL QUERY and KILL CONNECTION', async () => {
  const admin = mysqlPool(server.port)
  await prepareServer(admin)
  await installMysql(admin, { sharding, shards: shardList(SHARDS.mysql) })

  const scenario = new Scenario('mysql')
  const sourcePool = mysqlPool(server.port, SOURCE_USER, 8)
  const passed = new MysqlSource({
    sharding,
    databases: sourcePool,
    shards: shardList(SHARDS.mysql),
    timeoutMs: 1_000,
  })
  const owned = new MysqlSource({
    sharding,
    databases: sourceUrl(server.port),
    shards: shardList(SHARDS.mysql),
    timeoutMs: 1_000,
  })
  const writerPool = mysqlPool(server.port, 'root', 3)
  const committed: bigint[] = []
  const uncertain = { n: 0 }
  const shards = SHARDS.mysql
  const load = (ledger: Ledger, source: MysqlSource) =>
    scenario.load({
      ledger,
      source,
      shards,
      callers: 4,
      counts: [1, 7, 100, 1000, 1, 128],
      abortEvery: 97,
      abortAfterMs: 2,
    })
  load(scenario.ledger('MysqlSource (pool passed in)'), passed)
  load(scenario.ledger('MysqlSource (URL)'), owned)
  scenario.load({
    ledger: scenario.ledger('MysqlSource (rows)'),
    source: passed,
    shards,
    callers: 2,
    counts: [20, 50],
    onIds: mysqlRowWriter(writerPool, committed, uncertain),
  })
  const control = scenario.control(SHARDS.mysqlControl)
  killSessions(scenario, admin)

  await sleep(3_000)
  // The only server hangs: callers give up after timeoutMs (TIMED_OUT), none waits longer.
  scenario.ledgers[0]!.openWindow('mariadbd stopped 3 s')
  await server.kill('SIGSTOP')
  scenario.faults.add('SIGSTOP 3 s')
  try {
    await sleep(3_000)
  } finally {
    await server.kill('SIGCONT')
    scenario.ledgers[0]!.closeWindow()
  }
  for (let crash = 0; crash < 3; crash++) {
    await sleep(4_000)
    await server.kill('SIGKILL')
    scenario.faults.add('kill -9 mariadbd')
    await sleep(500)
    await server.restart()
    scenario.faults.add('restart')
  }
  await sleep(4_000)
  await scenario.stop()

  const present = await countPresentRows(admin, committed)
  scenario.rows['faults.rows (MariaDB InnoDB, innodb_flush_log_at_trx_commit 1)'] = {
    committed: committed.length,
    lost: committed.length - present,
    uncertain: uncertain.n,
  }
  const figures = scenario.save(inject('runDir'))
  await Promise.all([passed.close(), owned.close(), control.close()])
  await Promise.all([sourcePool.end(), writerPool.end(), admin.end()])

  checkScenario(figures)
  expect(figures.faults['kill -9 mariadbd']).toBe(3)
  expect(figures.faults['KILL QUERY']).toBeGreaterThan(0)
  expect(figures.faults['KILL CONNECTION']).toBeGreaterThan(0)
})
