import { startMariadb, type ThrowawayServer } from '@shardflake/conformance'
import { installMysql, MysqlSource } from '@shardflake/mysql'
import { afterAll, beforeAll, expect, inject, test } from 'vitest'
import { killSessions, mariadbPools, mysqlRows, sourceUrl } from '../src/mysql'
import { Scenario, SHARDS, sharding, shardList, sleep } from '../src/scenario'

let server: ThrowawayServer

beforeAll(async () => {
  server = await startMariadb({ durable: true, maxConnections: 300 })
})

afterAll(async () => {
  await server?.stop()
})

test('MysqlSource on MariaDB under kill -9 and restarts, KILL QUERY and KILL CONNECTION', async () => {
  const pools = await mariadbPools(server.port)
  await installMysql(pools.admin, { sharding, shards: shardList(SHARDS.mysql) })

  const scenario = new Scenario('mysql')
  const passed = new MysqlSource({
    sharding,
    databases: pools.source,
    shards: shardList(SHARDS.mysql),
    timeoutMs: 1_000,
  })
  const owned = new MysqlSource({
    sharding,
    databases: sourceUrl(server.port),
    shards: shardList(SHARDS.mysql),
    timeoutMs: 1_000,
  })
  scenario.loadDatabaseSources(
    'MysqlSource',
    { passed, owned },
    SHARDS.mysql,
    mysqlRows(scenario, pools, 'faults.rows (MariaDB InnoDB, innodb_flush_log_at_trx_commit 1)'),
  )
  scenario.control(SHARDS.mysqlControl)
  killSessions(scenario, pools.admin)

  await sleep(3_000)
  // The only server hangs: callers give up after timeoutMs (TIMED_OUT), none waits longer.
  await scenario.pause(server, 3_000, scenario.ledgers.slice(0, 1))
  for (let crash = 0; crash < 3; crash++) {
    await sleep(4_000)
    await scenario.crash([server], 500)
  }
  await sleep(4_000)
  const figures = await scenario.finish(inject('runDir'), [pools])
  expect(figures.faults['kill -9 mariadb']).toBe(3)
  expect(figures.faults['KILL QUERY']).toBeGreaterThan(0)
  expect(figures.faults['KILL CONNECTION']).toBeGreaterThan(0)
})
