import { startPostgres, type ThrowawayServer } from '@shardflake/conformance'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import pg from 'pg'
import { afterAll, beforeAll, expect, inject, test } from 'vitest'
import { type RowTally, Scenario, SHARDS, sharding, shardList, sleep } from '../src/scenario'

let server: ThrowawayServer

beforeAll(async () => {
  server = await startPostgres({ durable: true, maxConnections: 200 })
})

afterAll(async () => {
  await server?.stop()
})

/**
 * A pool of the test. Idle clients of a pool you own report the server going away on the pool
 * (yours to handle). The test's own pools (`infrastructure`) also ignore errors on checked-out
 * clients, so an unhandled 'error' event in this file can only come from a source's use of the
 * pool it was given or opened.
 */
function pool(name: string, max: number, infrastructure = true): pg.Pool {
  const created = new pg.Pool({
    connectionString: server.url,
    max,
    application_name: name,
    connectionTimeoutMillis: 2_000,
  })
  created.on('error', ignore)
  if (infrastructure) created.on('connect', (client) => client.on('error', ignore))
  return created
}

/**
 * Writes each acknowledged batch as rows in one transaction; counts the rows of transactions
 * whose COMMIT was acknowledged (synchronous_commit = on: they must survive any restart).
 */
function rowWriter(writer: pg.Pool, tally: RowTally) {
  return async (ids: bigint[], shard: number) => {
    let client: pg.PoolClient | undefined
    try {
      client = await writer.connect()
      // A checked-out client reports a connection that ends between statements here.
      client.on('error', ignore)
      await client.query('BEGIN')
      await client.query(
        'INSERT INTO faults_rows (id, shard) SELECT unnest($1::bigint[]), $2::integer',
        [ids.map(String), shard],
      )
      await client.query('COMMIT')
      tally.committed.push(...ids)
    } catch {
      tally.uncertain++
    } finally {
      client?.release(true)
    }
  }
}

const ignore = () => undefined

async function countPresent(admin: pg.Pool, ids: readonly bigint[]): Promise<number> {
  let present = 0
  for (let at = 0; at < ids.length; at += 50_000) {
    const chunk = ids.slice(at, at + 50_000).map(String)
    const { rows } = await admin.query<{ n: string }>(
      'SELECT count(*) AS n FROM faults_rows WHERE id = ANY($1::bigint[])',
      [chunk],
    )
    present += Number(rows[0]?.n ?? 0)
  }
  return present
}

test('PostgresSource under restarts (fast, immediate), terminated and cancelled sessions', async () => {
  const admin = pool('faults-admin', 2)
  await installPostgres(admin, { sharding, shards: shardList(SHARDS.postgres) })
  await admin.query('CREATE TABLE faults_rows (id bigint PRIMARY KEY, shard integer NOT NULL)')

  const scenario = new Scenario('postgres')
  const sourcePool = pool('faults-source', 8, false)
  const passed = new PostgresSource({ sharding, databases: sourcePool, timeoutMs: 1_000 })
  const owned = new PostgresSource({
    sharding,
    databases: `${server.url}?application_name=faults-source-url`,
    timeoutMs: 1_000,
  })
  const writerPool = pool('faults-writer', 3)
  const tally = scenario.rowTally('faults_rows (PostgreSQL, synchronous_commit on)', (ids) =>
    countPresent(admin, ids),
  )
  scenario.loadDatabaseSources(
    'PostgresSource',
    { passed, owned },
    SHARDS.postgres,
    rowWriter(writerPool, tally),
  )
  scenario.control(SHARDS.postgresControl)

  const sessions = async (state?: string) => {
    const { rows } = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'faults-source%' AND pid <> pg_backend_pid()${
        state ? ' AND state = $1' : ''
      }`,
      state ? [state] : [],
    )
    return rows.map((row) => row.pid)
  }
  const signalOne = async (fn: 'pg_cancel_backend' | 'pg_terminate_backend', state?: string) => {
    const pids = await sessions(state)
    const pid = pids[Math.floor(Math.random() * pids.length)]
    if (pid === undefined) return 0
    const { rows } = await admin.query<{ ok: boolean }>(`SELECT ${fn}($1) AS ok`, [pid])
    return rows[0]?.ok ? 1 : 0
  }
  scenario.every(40, 'pg_cancel_backend', () => signalOne('pg_cancel_backend', 'active'))
  scenario.every(150, 'pg_terminate_backend', () => signalOne('pg_terminate_backend'))
  // A session that hangs mid-call (its backend stopped): the caller gives up after timeoutMs.
  scenario.every(2_500, 'SIGSTOP of a session for 1.5 s', async () => {
    const pids = await sessions('active')
    const pid = pids[Math.floor(Math.random() * pids.length)]
    if (pid === undefined) return 0
    process.kill(pid, 'SIGSTOP')
    try {
      await sleep(1_500)
    } finally {
      try {
        process.kill(pid, 'SIGCONT')
      } catch {}
    }
    return 1
  })

  for (const mode of ['fast', 'immediate', 'immediate', 'fast', 'immediate'] as const) {
    await sleep(4_000)
    await server.restart(mode)
    scenario.faults.add(`restart, ${mode} shutdown`)
  }
  await sleep(3_000)
  const figures = await scenario.finish(inject('runDir'), [sourcePool, writerPool, admin])
  expect(figures.faults['restart, immediate shutdown']).toBe(3)
  expect(figures.faults.pg_cancel_backend).toBeGreaterThan(0)
  expect(figures.faults.pg_terminate_backend).toBeGreaterThan(0)
})
