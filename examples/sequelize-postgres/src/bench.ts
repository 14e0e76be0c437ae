/**
 * Sequelize 6 on PostgreSQL: the same writes with shardflake keys and with BIGSERIAL keys, in the
 * same run, alternating, medians of several rounds.
 *
 *   node src/bench.ts [--json] [--quick] [--rounds=11] [--workloads=single,nested,batch,spread,sorted] [--users=16]
 *     [--database=sf_sequelize_example] [--prefetch-size=100] [--prefetch-max-age-ms=1000] [--save <file>] [--chart <file>]
 *   (after `pnpm build`; PG_URL elsewhere than postgres://postgres@127.0.0.1:5432)
 *
 * Workloads (each call timed from the call to its resolution; `--users` users take turns, so
 * single rows, nested rows and one-shard batches go to up to `--users` shards):
 * - single: `Post.create({ userId, title })`, one row per call;
 * - nested: `Post.create({ ..., comments: [3] }, { include })`, a post and its three comments;
 * - batch:  `Post.bulkCreate(1000 rows)` of one user (one logical shard: a tenant's import, a
 *           parent's children);
 * - spread: `Post.bulkCreate(1000 rows)` by 1000 users (every logical shard);
 * - sorted: the same rows ordered by shard (user mod 64), so that their IDs ascend in row order
 *           as auto-increment keys do: what the order of keys costs the primary-key index.
 *
 * Modes (each its own Sequelize instance and tables):
 * - autoincrement:   BIGSERIAL keys, the baseline (no shardflake);
 * - in-process:      `InProcessSource` (no round trip), in a second database: a logical shard
 *                    has exactly one source;
 * - database:        `PostgresSource` with `prefetch: { size: 100 }` (`--prefetch-size`);
 * - db, no prefetch: the same source without prefetch: one `next_ids()` per shard per call.
 *
 * `--chart <file>` writes every round's rows/s for bench-charts (one group per workload, each mode
 * against autoincrement); `--save <file>` writes the JSON result.
 */
import { writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import {
  defineSharding,
  type IdSource,
  InProcessSource,
  instagram,
  stringifyIds,
} from '@shardflake/core'
import { installPostgres, PostgresSource, type SqlClient } from '@shardflake/postgres'
import { shardedIds } from '@shardflake/sequelize'
import pg from 'pg'
import { Sequelize } from 'sequelize'
import { shuffled } from '../../../bench-charts/src/shuffle.ts'
import { type Blog, defineBlog } from './models.ts'

const flag = (name: string) =>
  process.argv.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1]
const after = (name: string) => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : undefined
}
const json = process.argv.includes('--json')
const quick = process.argv.includes('--quick')
const rounds = Number(flag('rounds') ?? (quick ? 3 : 7))
const workloads = (flag('workloads') ?? 'single,nested,batch,spread,sorted').split(
  ',',
) as Workload[]
const chartFile = after('chart')
/** How many users write single rows, nested rows and one-shard batches (each its own shard up to 64). */
const users = Number(flag('users') ?? 16)
/**
 * How long prefetched IDs stay usable (ms). The test passes a long one so that a slow, shared
 * machine cannot turn the round-trip count into a timing measurement.
 */
const prefetchMaxAgeMs = Number(flag('prefetch-max-age-ms') ?? 1000)
const prefetchSize = Number(flag('prefetch-size') ?? 100)
const saveFile = after('save')
const logicalShards = 64
/** The application's sharding, handed to every source. */
const sharding = defineSharding({ layout: instagram, logicalShards })
const database = `${flag('database') ?? 'sf_sequelize_example'}_${process.pid}`
const loadAtStart = loadavg()[0]!

type Workload = 'single' | 'nested' | 'batch' | 'spread' | 'sorted'
/** Calls per mode and round, and rows per call. */
const plan: Record<Workload, { calls: number; rows: number }> = {
  single: { calls: quick ? 30 : 400, rows: 1 },
  nested: { calls: quick ? 15 : 150, rows: 4 },
  batch: { calls: quick ? 1 : 10, rows: 1000 },
  spread: { calls: quick ? 1 : 10, rows: 1000 },
  sorted: { calls: quick ? 1 : 10, rows: 1000 },
}

const base = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
const urlOf = (name: string) => Object.assign(new URL(base), { pathname: `/${name}` }).toString()
const databases = { main: database, inProcess: `${database}_inproc` }
const admin = new pg.Client({ connectionString: base.toString() })
await admin.connect()
for (const name of Object.values(databases)) {
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${name}`)
}
const pool = new pg.Pool({ connectionString: urlOf(databases.main), max: 4 })
pool.on('error', () => undefined) // an idle connection ended by the server
await installPostgres(pool, { sharding, shards: 'all' })
/** The pool as the database sources see it, counting their round trips (next_ids() calls). */
let roundTrips = 0
const counted: SqlClient = {
  query: (text, params) => {
    roundTrips++
    return pool.query(text, params)
  },
}
const inProcess = new InProcessSource({ sharding, shards: 'all' })
const prefetched = new PostgresSource({
  sharding,
  databases: counted,
  prefetch: { size: prefetchSize, maxAgeMs: prefetchMaxAgeMs },
})
const direct = new PostgresSource({ sharding, databases: counted })

/** A Sequelize instance of its own per mode, with shardedIds() around `source` (none: BIGSERIAL). */
async function open(name: string, suffix: string, source?: IdSource) {
  const sequelize = new Sequelize(urlOf(name), { logging: false, pool: { max: 4 } })
  if (source) shardedIds(sequelize, { source })
  const blog = defineBlog(sequelize, source ? 'sharded' : 'auto', suffix)
  await sequelize.sync()
  return { sequelize, blog }
}
const modes = {
  autoincrement: await open(databases.main, 'auto'),
  'in-process': await open(databases.inProcess, 'inproc', inProcess),
  database: await open(databases.main, 'db', prefetched),
  'db, no prefetch': await open(databases.main, 'direct', direct),
}
type Mode = keyof typeof modes
const names = Object.keys(modes) as Mode[]

let user = 0
/** The next of `users` users, in turn (user n is a plain key: shard n mod 64). */
const nextUser = () => (user++ % users) + 1
/** One call of a workload; returns its duration in ms. */
async function call(workload: Workload, { Post }: Blog): Promise<number> {
  const started = performance.now()
  if (workload === 'single') {
    await Post.create({ userId: nextUser(), title: 'single' })
  } else if (workload === 'nested') {
    await Post.create(
      {
        userId: nextUser(),
        title: 'nested',
        comments: [{ body: 'a' }, { body: 'b' }, { body: 'c' }],
      },
      { include: [{ association: 'comments' }] },
    )
  } else if (workload === 'batch') {
    const userId = nextUser()
    await Post.bulkCreate(Array.from({ length: 1000 }, () => ({ userId, title: 'batch' })))
  } else {
    const rows = Array.from({ length: 1000 }, (_, i) => ({ userId: i + 1, title: workload }))
    if (workload === 'sorted') rows.sort((a, b) => (a.userId % 64) - (b.userId % 64))
    await Post.bulkCreate(rows)
  }
  return performance.now() - started
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}
const round3 = (value: number) => Number(value.toFixed(3))

interface Result {
  workload: Workload
  mode: Mode
  rowsPerSecond: number
  ratio: number
  ratioMin: number
  ratioMax: number
  p50Ms: number
  p99Ms: number
  roundTripsPerCall: number | null
}
const results: Result[] = []
const perRound: { workload: Workload; mode: Mode; values: number[] }[] = []
let turn = 0

for (const workload of workloads) {
  const { calls, rows } = plan[workload]
  const throughput = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const ratios = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const latencies = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const trips = new Map<Mode, number>(names.map((mode) => [mode, 0]))
  for (let round = 0; round <= rounds; round++) {
    const total = new Map<Mode, number>(names.map((mode) => [mode, 0]))
    for (let c = 0; c < calls; c++) {
      turn++
      // Every mode makes the same call back to back, in a shuffled order.
      for (const mode of shuffled(names, turn)) {
        const before = roundTrips
        const elapsed = await call(workload, modes[mode].blog)
        if (round === 0) continue // warm-up
        total.set(mode, total.get(mode)! + elapsed)
        latencies.get(mode)!.push(elapsed)
        trips.set(mode, trips.get(mode)! + roundTrips - before)
      }
    }
    if (round === 0) continue
    for (const mode of names) {
      throughput.get(mode)!.push((calls * rows) / (total.get(mode)! / 1000))
      ratios.get(mode)!.push(total.get('autoincrement')! / total.get(mode)!)
    }
  }
  for (const mode of names) {
    perRound.push({ workload, mode, values: throughput.get(mode)! })
    const modeRatios = ratios.get(mode)!
    results.push({
      workload,
      mode,
      rowsPerSecond: Math.round(median(throughput.get(mode)!)),
      ratio: round3(median(modeRatios)),
      ratioMin: round3(Math.min(...modeRatios)),
      ratioMax: round3(Math.max(...modeRatios)),
      p50Ms: Number(percentile(latencies.get(mode)!, 50).toFixed(2)),
      p99Ms: Number(percentile(latencies.get(mode)!, 99).toFixed(2)),
      roundTripsPerCall:
        mode === 'database' || mode === 'db, no prefetch'
          ? Number((trips.get(mode)! / (rounds * calls)).toFixed(2))
          : null,
    })
  }
}

/**
 * Placement, decoded from the IDs as stored: every post on its user's shard, every comment on its
 * post's, in every table with sharded keys.
 */
const placement = { posts: 0, comments: 0, misplaced: 0 }
for (const [mode, { sequelize }] of Object.entries(modes)) {
  if (mode === 'autoincrement') continue
  const suffix = { 'in-process': 'inproc', database: 'db', 'db, no prefetch': 'direct' }[mode]
  const [pairs] = await sequelize.query(
    `SELECT 'post' AS kind, id::text AS id, user_id::text AS key FROM posts_${suffix}
     UNION ALL SELECT 'comment', id::text, post_id::text FROM comments_${suffix}`,
  )
  for (const { kind, id, key } of pairs as { kind: string; id: string; key: string }[]) {
    const expected = kind === 'post' ? sharding.shardForKey(key) : sharding.shardOfId(key)
    if (kind === 'post') placement.posts++
    else placement.comments++
    if (sharding.shardOfId(id) !== expected) placement.misplaced++
  }
}

const loads = [loadAtStart, loadavg()[0]!]
const summary = {
  date: new Date().toISOString().slice(0, 10),
  rounds,
  plan: Object.fromEntries(workloads.map((workload) => [workload, plan[workload]])),
  logicalShards,
  users,
  node: process.versions.node,
  loadAverage: loads.map((load) => Number(load.toFixed(1))),
  results,
  placement,
}
if (saveFile) writeFileSync(saveFile, stringifyIds(summary, 2))
if (chartFile) {
  const label = {
    single: 'create(), one row',
    nested: 'create() with 3 comments (include)',
    batch: 'bulkCreate() of 1000 rows, one shard',
    spread: 'bulkCreate() of 1000 rows, 64 shards',
    sorted: 'bulkCreate() of 1000 rows, 64 shards, rows in shard order',
  }
  writeFileSync(
    chartFile,
    JSON.stringify({
      title: 'Sequelize on PostgreSQL: sharded keys against BIGSERIAL',
      unit: 'rows/s',
      note: [
        `${summary.date}, ${rounds} rounds after a warm-up, Node ${process.versions.node}, 64 logical shards`,
        `Load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)} on ${availableParallelism()} cores at the start and end of the run`,
      ],
      baseline: 'autoincrement',
      rows: perRound.map(({ workload, mode, values }) => ({
        label: mode,
        group: label[workload],
        values: values.map((value) => Number(value.toPrecision(4))),
      })),
    }),
  )
}

if (json) {
  console.log(stringifyIds(summary, 2))
} else {
  console.log(
    `Sequelize 6 + PostgreSQL, ${rounds} rounds; ratio = rows/s against autoincrement in the same round: median (min..max)\n`,
  )
  console.log(
    `${'workload'.padEnd(8)} ${'mode'.padEnd(16)} ${'rows/s'.padStart(8)} ${'ratio'.padStart(18)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)}  round trips/call`,
  )
  for (const r of results) {
    const ratio = `${r.ratio.toFixed(2)} (${r.ratioMin.toFixed(2)}..${r.ratioMax.toFixed(2)})`
    console.log(
      `${r.workload.padEnd(8)} ${r.mode.padEnd(16)} ${String(r.rowsPerSecond).padStart(8)} ${ratio.padStart(18)} ${r.p50Ms.toFixed(2).padStart(8)} ${r.p99Ms.toFixed(2).padStart(8)}  ${r.roundTripsPerCall ?? '-'}`,
    )
  }
}
console.error(
  `placement: ${placement.posts} posts and ${placement.comments} comments decoded, ${placement.misplaced} off their shard`,
)

for (const { sequelize } of Object.values(modes)) await sequelize.close()
await prefetched.close()
await direct.close()
inProcess.close()
await pool.end()
for (const name of Object.values(databases))
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
await admin.end()
