/**
 * next_id() against bare nextval() and bigserial, measured in the database: each variant runs its statement
 * from 1 or 8 connections at once, back to back with its baseline, in alternating order, once per
 * round; a ratio is the median of the per-round ratios (with min..max), so load that drifts on a
 * shared machine falls on both sides alike.
 *
 *   node bench/next-id.bench.ts [--rounds 9] [--repeat 20] [--json]
 *
 * PG_URL names the server (default postgres://postgres@127.0.0.1:5432/test); the bench creates a
 * database of its own there (PG_BENCH_DB, default sf_pg_next_id_<pid>) and drops it at the end.
 * Commits are asynchronous in the bench's sessions (`synchronous_commit = off`), so that the
 * cost of making IDs is not hidden behind the wait for the disk.
 *
 * Two figures per pair: IDs per second of wall-clock time, and IDs per second of CPU time of the
 * server processes that ran the statements (from `/proc/<pid>/schedstat`, so the bench must run
 * on the database's machine, as a user allowed to read it). On a machine shared with other
 * jobs the second moves far less: time spent waiting for a core does not count.
 */
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { defineSharding, instagram } from '@shardflake/core'
import { installPostgres } from '@shardflake/postgres'
import pg from 'pg'

const args = process.argv.slice(2)
const option = (name: string, fallback: number) => {
  const index = args.indexOf(`--${name}`)
  return index >= 0 ? Number(args[index + 1]) : fallback
}
const rounds = option('rounds', 9)
const repeat = option('repeat', 20)
const json = args.includes('--json')
const serverUrl = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const DB = process.env.PG_BENCH_DB ?? `sf_pg_next_id_${process.pid}`
const url = new URL(serverUrl)
url.pathname = `/${DB}`

const admin = new pg.Client({ connectionString: serverUrl })
await admin.connect()
admin.on('error', () => undefined)
await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`)
await admin.query(`CREATE DATABASE ${DB}`)
const setup = new pg.Client({ connectionString: url.toString() })
await setup.connect()
await installPostgres(setup, {
  sharding: defineSharding({ layout: instagram, logicalShards: 2000 }),
  shards: [5],
})
await setup.query(`
  CREATE SEQUENCE bench_seq;
  CREATE TABLE t_serial (id bigserial PRIMARY KEY, payload int NOT NULL);
  CREATE TABLE t_default (id bigint PRIMARY KEY DEFAULT shard_5.next_id(), payload int NOT NULL);
`)
await setup.end()

const values1000 = Array.from({ length: 1000 }, () => '(1)').join(',')
interface Variant {
  name: string
  sql: string
  ids: number
  baseline?: string
}
const variants: Variant[] = [
  { name: 'nextval', sql: `SELECT nextval('bench_seq')`, ids: 1 },
  { name: 'next_id', sql: 'SELECT shard_5.next_id()', ids: 1, baseline: 'nextval' },
  {
    name: 'nextval_x1000',
    sql: `SELECT count(nextval('bench_seq')) FROM generate_series(1, 1000)`,
    ids: 1000,
  },
  {
    name: 'next_id_x1000',
    sql: 'SELECT count(shard_5.next_id()) FROM generate_series(1, 1000)',
    ids: 1000,
    baseline: 'nextval_x1000',
  },
  { name: 'insert_serial', sql: 'INSERT INTO t_serial (payload) VALUES (1)', ids: 1 },
  {
    name: 'insert_default',
    sql: 'INSERT INTO t_default (payload) VALUES (1)',
    ids: 1,
    baseline: 'insert_serial',
  },
  {
    name: 'insert1000_serial',
    sql: `INSERT INTO t_serial (payload) VALUES ${values1000}`,
    ids: 1000,
  },
  {
    name: 'insert1000_default',
    sql: `INSERT INTO t_default (payload) VALUES ${values1000}`,
    ids: 1000,
    baseline: 'insert1000_serial',
  },
]
const byName = new Map(variants.map((v) => [v.name, v]))

const connections: pg.Client[] = []
const pids: number[] = []
for (let i = 0; i < 8; i++) {
  const client = new pg.Client({ connectionString: url.toString() })
  await client.connect()
  client.on('error', () => undefined)
  pids.push((await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number)
  await client.query('SET synchronous_commit = off')
  await client.query('SELECT shard_5.next_id()')
  connections.push(client)
}

/** Nanoseconds the server processes of the first `clients` connections spent on a core. */
const cpuNs = (clients: number) =>
  pids
    .slice(0, clients)
    .reduce(
      (sum, pid) => sum + Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]),
      0,
    )

/**
 * IDs per second of wall-clock time and of server CPU time of `variant` from `clients`
 * connections, each running it `repeat` times (50 x `repeat` for single IDs).
 */
async function run(variant: Variant, clients: number): Promise<{ wall: number; cpu: number }> {
  const perClient = variant.ids === 1 ? repeat * 50 : repeat
  const cpuBefore = cpuNs(clients)
  const started = process.hrtime.bigint()
  await Promise.all(
    connections.slice(0, clients).map(async (client) => {
      for (let i = 0; i < perClient; i++) await client.query(variant.sql)
    }),
  )
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  const cpuSeconds = (cpuNs(clients) - cpuBefore) / 1e9
  const ids = perClient * clients * variant.ids
  return { wall: ids / seconds, cpu: ids / cpuSeconds }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
const loads: number[] = []
const rows: {
  cell: string
  baseline: string
  idsPerSecond: number
  baselineIdsPerSecond: number
  ratio: number
  ratioMin: number
  ratioMax: number
  cpuRatio: number
  cpuRatioMin: number
  cpuRatioMax: number
}[] = []
for (const clients of [1, 8]) {
  for (const variant of variants.filter((v) => v.baseline)) {
    const base = byName.get(variant.baseline!)!
    const ratios: number[] = []
    const cpuRatios: number[] = []
    const own: number[] = []
    const theirs: number[] = []
    for (let round = 0; round < rounds; round++) {
      loads.push(loadavg()[0]!)
      const first = round % 2 === 0 ? base : variant
      const a = await run(first, clients)
      const b = await run(first === base ? variant : base, clients)
      const [baseIds, ids] = first === base ? [a, b] : [b, a]
      ratios.push(ids.wall / baseIds.wall)
      cpuRatios.push(ids.cpu / baseIds.cpu)
      own.push(ids.wall)
      theirs.push(baseIds.wall)
    }
    const row = {
      cell: `${variant.name}@${clients}`,
      baseline: `${base.name}@${clients}`,
      idsPerSecond: Math.round(median(own)),
      baselineIdsPerSecond: Math.round(median(theirs)),
      ratio: Number(median(ratios).toFixed(2)),
      ratioMin: Number(Math.min(...ratios).toFixed(2)),
      ratioMax: Number(Math.max(...ratios).toFixed(2)),
      cpuRatio: Number(median(cpuRatios).toFixed(2)),
      cpuRatioMin: Number(Math.min(...cpuRatios).toFixed(2)),
      cpuRatioMax: Number(Math.max(...cpuRatios).toFixed(2)),
    }
    rows.push(row)
    if (!json)
      process.stderr.write(
        `${row.cell}: wall ${row.ratio} (${row.ratioMin}..${row.ratioMax}), cpu ${row.cpuRatio} (${row.cpuRatioMin}..${row.cpuRatioMax})\n`,
      )
  }
}
for (const client of connections) await client.end().catch(() => undefined)
await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`).catch(() => undefined)
await admin.end().catch(() => undefined)

const loadRange = `${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`
if (json) {
  console.log(JSON.stringify({ rounds, repeat, loadRange, rows }, null, 2))
} else {
  console.log(`${new Date().toISOString()}, load average (1 min) ${loadRange}`)
  console.log(
    `| cell | IDs/s (median) | baseline | baseline IDs/s (median) | ratio (median of ${rounds} rounds) | ratio min..max | CPU-time ratio (median) | CPU-time ratio min..max |`,
  )
  console.log('|---|---:|---|---:|---:|---:|---:|---:|')
  for (const row of rows) {
    console.log(
      `| ${row.cell} | ${row.idsPerSecond.toLocaleString('en')} | ${row.baseline} | ${row.baselineIdsPerSecond.toLocaleString('en')} | ${row.ratio} | ${row.ratioMin}..${row.ratioMax} | ${row.cpuRatio} | ${row.cpuRatioMin}..${row.cpuRatioMax} |`,
    )
  }
}
