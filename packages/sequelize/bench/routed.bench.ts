/**
 * `node bench/routed.bench.ts` (after `pnpm --filter @shardflake/sequelize build`): what
 * `shardedSequelize()` costs and sends.
 *
 * Three databases on one PostgreSQL server (`PG_URL`, default the local test server) play servers
 * a, b and c (logical shards 0-20, 21-41, 42-63 of 64); each counts the INSERT statements on its
 * `events` table with a statement-level trigger, in the database itself.
 *
 * 1. Statements: one `sharded.bulkCreate()` of 1000 rows over all 64 shards; the counters must
 *    show one INSERT on each database, and every row must be on its shard's home.
 * 2. Overhead: 1000 rows on the shards of server a, written alternately through the router
 *    (`sharded.bulkCreate('Event', rows)`), directly through server a's routed model
 *    (`Event.bulkCreate(rows)`, guard hooks included), and through a Sequelize on the same
 *    database with `shardedIds()` only (no routing, no guard). Each round times one call of each,
 *    in a rotating order; the ratios are per round, reported as the median with the smallest and
 *    largest round. ROUNDS sets the rounds (default 15, after 2 warm-up rounds). `--json` prints
 *    JSON only.
 */
import { availableParallelism, loadavg } from 'node:os'
import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
import { shardedId, shardedIds, shardedSequelize } from '@shardflake/sequelize'
import pg from 'pg'
import { DataTypes, type ModelStatic, Sequelize } from 'sequelize'

const json = process.argv.includes('--json')
const rounds = Number(process.env.ROUNDS ?? 15)
const warmup = 2
const rowsPerCall = 1000
const base = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const names = ['a', 'b', 'c'] as const
const log = (text: string) => {
  if (!json) console.log(text)
}
const median = (values: number[]) => {
  const sorted = [...values].sort((x, y) => x - y)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
const urlOf = (database: string) => {
  const url = new URL(base)
  url.pathname = `/${database}`
  return url.toString()
}

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const map = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])

const admin = new pg.Client({ connectionString: base })
await admin.connect()
const raw: Record<string, pg.Client> = {}
for (const name of names) {
  const database = `sf_sequelize_routed_bench_${name}`
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${database}`)
  const client = new pg.Client({ connectionString: urlOf(database) })
  await client.connect()
  for (const sql of [
    'CREATE TABLE events (id BIGINT PRIMARY KEY, tenant_id INTEGER NOT NULL, body TEXT NOT NULL)',
    'CREATE TABLE insert_statements (tbl TEXT NOT NULL)',
    `CREATE FUNCTION count_insert_statement() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN INSERT INTO insert_statements VALUES (TG_TABLE_NAME); RETURN NULL; END $$`,
    'CREATE TRIGGER events_insert_statements AFTER INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION count_insert_statement()',
  ]) {
    await client.query(sql)
  }
  raw[name] = client
}

const source = new InProcessSource({ sharding, shards: 'all' })
function open(name: string): Sequelize {
  const sequelize = new Sequelize(urlOf(`sf_sequelize_routed_bench_${name}`), {
    logging: false,
    pool: { max: 4 },
  })
  shardedIds(sequelize, { source })
  sequelize.define(
    'Event',
    {
      id: shardedId({ shardBy: 'tenantId' }),
      tenantId: { type: DataTypes.INTEGER, allowNull: false },
      body: { type: DataTypes.TEXT, allowNull: false },
    },
    { tableName: 'events', timestamps: false, underscored: true },
  )
  return sequelize
}
const servers = Object.fromEntries(names.map((name) => [name, open(name)]))
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedSequelize(homes)
const plain = open('a') // shardedIds() only: not handed to ShardHomes, no guard

async function statements(): Promise<number[]> {
  return Promise.all(
    names.map(async (name) => {
      const { rows } = await raw[name]!.query(
        "SELECT count(*)::int AS n FROM insert_statements WHERE tbl = 'events'",
      )
      return rows[0].n as number
    }),
  )
}

// 1. One call over every shard: one INSERT per server.
const spread = Array.from({ length: rowsPerCall }, (_, i) => ({ tenantId: i % 64, body: `s${i}` }))
const before = await statements()
await sharded.bulkCreate('Event', spread)
const after = await statements()
const perServer = after.map((n, i) => n - before[i]!)
const misplaced: Record<string, number> = {}
const stored: Record<string, number> = {}
for (const name of names) {
  const { rows } = await raw[name]!.query('SELECT id::text AS id FROM events')
  stored[name] = rows.length
  misplaced[name] = rows.filter((row) => map.targetFor(sharding.shardOfId(row.id)) !== name).length
}
log(`1000 rows over 64 shards: INSERT statements per server ${JSON.stringify(perServer)}`)
log(`rows per server ${JSON.stringify(stored)}, not at home ${JSON.stringify(misplaced)}`)

// 2. Overhead, rows on server a's shards (0-20).
const rowsOnA = () =>
  Array.from({ length: rowsPerCall }, (_, i) => ({ tenantId: i % 21, body: `r${i}` }))
const Event = servers.a!.model('Event') as ModelStatic<never>
const PlainEvent = plain.model('Event') as ModelStatic<never>
const modes: Record<string, (rows: Record<string, unknown>[]) => Promise<unknown>> = {
  router: (rows) => sharded.bulkCreate('Event', rows),
  direct: (rows) => Event.bulkCreate(rows as never[]),
  unrouted: (rows) => PlainEvent.bulkCreate(rows as never[]),
}
const order = Object.keys(modes)
const times: Record<string, number[]> = Object.fromEntries(order.map((mode) => [mode, []]))
/** This process's CPU time (user + system) during each call, ms: the client's own work. */
const cpuTimes: Record<string, number[]> = Object.fromEntries(order.map((mode) => [mode, []]))
const loads: number[] = []
for (let round = 0; round < warmup + rounds; round++) {
  const rotated = order.map((_, i) => order[(i + round) % order.length]!)
  for (const mode of rotated) {
    const rows = rowsOnA()
    const cpu = process.cpuUsage()
    const started = performance.now()
    await modes[mode]!(rows)
    const elapsed = performance.now() - started
    const used = process.cpuUsage(cpu)
    if (round >= warmup) {
      times[mode]!.push(elapsed)
      cpuTimes[mode]!.push((used.user + used.system) / 1000)
    }
  }
  if (round >= warmup) loads.push(loadavg()[0]!)
}
const ratio = (mode: string, baseline: string, of = times) => {
  const perRound = of[mode]!.map((t, i) => t / of[baseline]![i]!)
  return { median: median(perRound), min: Math.min(...perRound), max: Math.max(...perRound) }
}
const results = {
  machine: {
    cores: availableParallelism(),
    loadavg1: { min: Math.min(...loads), max: Math.max(...loads) },
  },
  node: process.version,
  rounds,
  rowsPerCall,
  statementsPerServer: perServer,
  rowsNotAtHome: misplaced,
  medianMs: Object.fromEntries(order.map((mode) => [mode, median(times[mode]!)])),
  routerOverDirect: ratio('router', 'direct'),
  routerOverUnrouted: ratio('router', 'unrouted'),
  directOverUnrouted: ratio('direct', 'unrouted'),
  medianCpuMs: Object.fromEntries(order.map((mode) => [mode, median(cpuTimes[mode]!)])),
  cpuRouterOverDirect: ratio('router', 'direct', cpuTimes),
  cpuDirectOverUnrouted: ratio('direct', 'unrouted', cpuTimes),
}
const show = (r: { median: number; min: number; max: number }) =>
  `${r.median.toFixed(3)} (${r.min.toFixed(2)}..${r.max.toFixed(2)})`
log(
  `bulkCreate of ${rowsPerCall} rows on server a, ${rounds} rounds, median ms ${JSON.stringify(
    Object.fromEntries(Object.entries(results.medianMs).map(([k, v]) => [k, Number(v.toFixed(1))])),
  )}`,
)
log(`router / direct:   ${show(results.routerOverDirect)}`)
log(`router / unrouted: ${show(results.routerOverUnrouted)}`)
log(`direct / unrouted: ${show(results.directOverUnrouted)}`)
log(`client CPU, router / direct: ${show(results.cpuRouterOverDirect)}`)
log(`client CPU, direct / unrouted: ${show(results.cpuDirectOverUnrouted)}`)
log(
  `load average (1 min) during the rounds: ${results.machine.loadavg1.min.toFixed(1)}-${results.machine.loadavg1.max.toFixed(1)} on ${results.machine.cores} cores`,
)
if (json) console.log(JSON.stringify(results, null, 2))

await homes.close()
await Promise.all([...Object.values(servers), plain].map((sequelize) => sequelize.close()))
source.close()
for (const client of Object.values(raw)) await client.end()
for (const name of names) {
  await admin.query(`DROP DATABASE IF EXISTS sf_sequelize_routed_bench_${name} WITH (FORCE)`)
}
await admin.end()
