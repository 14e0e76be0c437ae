/**
 * Inserts through Drizzle on PostgreSQL: posts by existing authors, one row per INSERT and 1000
 * rows per INSERT, with sharded keys against the same table keyed by an identity column, in the
 * same run, alternating, medians of several rounds. Every mode learns the IDs of the rows it
 * inserted, as an application does: the identity and `$defaultFn` modes with `RETURNING`, the
 * others because `ids.assign()` put them in the rows before the INSERT.
 *
 *   node src/bench.ts [--json] [--quick] [--sizes=1,1000] [--rounds=7] [--authors=1]
 *     [--database=sf_drizzle_example] [--prefetch=100] [--prefetch-max-age-ms=1000] [--chart <file>]
 *   (after `pnpm build`; PG_URL elsewhere than postgres://postgres@127.0.0.1:5432/test)
 *
 * Modes:
 * - identity:        `GENERATED ALWAYS AS IDENTITY`, `.returning({ id })` (the baseline)
 * - in-process:      `InProcessSource`, `await ids.assign(posts, rows)`, then the INSERT
 * - $defaultFn:      `InProcessSource` through the column's `$defaultFn` (a scoped shard),
 *                    `.returning({ id })`: no assign step
 * - database:        `PostgresSource` (`next_ids()` in the database) with a prefetch buffer
 *                    (`--prefetch`, per shard), through `ids.assign()`
 * - db, no prefetch: the same source without a buffer: one round trip per shard per INSERT
 *
 * `--authors=N` spreads each INSERT over N authors, so N logical shards (1: one author's rows,
 * one shard). `--chart <file>` writes every round's rows/s for bench-charts.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { defineSharding, InProcessSource, instagram, stringifyIds } from '@shardflake/core'
import { shardedIds } from '@shardflake/drizzle'
import { installPostgres, PostgresSource, type SqlClient } from '@shardflake/postgres'
import { drizzle } from 'drizzle-orm/node-postgres'
import { npmVersion } from 'drizzle-orm/version'
import pg from 'pg'
import { shuffled } from '../../../bench-charts/src/shuffle.ts'
import { autoAuthors, autoPosts, requestShard, schemaSql, shardedTables } from './schema.ts'

const option = (name: string, fallback: string) =>
  process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
const json = process.argv.includes('--json')
const quick = process.argv.includes('--quick')
const logicalShards = 64
/** The application's sharding, handed to every source. */
const sharding = defineSharding({ layout: instagram, logicalShards })
const sizes = option('sizes', '1,1000').split(',').map(Number)
const rounds = Number(option('rounds', quick ? '3' : '7'))
const authorsPerInsert = Number(option('authors', '1'))
const prefetchSize = Number(option('prefetch', '100'))
/**
 * How long prefetched IDs stay usable. The test passes a long one so that a slow, shared machine
 * cannot turn the round-trip count into a timing measurement.
 */
const prefetchMaxAgeMs = Number(option('prefetch-max-age-ms', '1000'))
/** Rows per mode and round: about 400 single-row INSERTs, 5 INSERTs of 1000 (fewer in quick runs). */
const insertsPerRound = (size: number) =>
  Math.max(quick ? 1 : 3, Math.round((quick ? 100 : size === 1 ? 400 : 5000) / size))
const chartAt = process.argv.indexOf('--chart')
const chartFile = chartAt >= 0 ? process.argv[chartAt + 1] : undefined
const loadAtStart = loadavg()[0]!

const base = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
const urlOf = (name: string) => {
  const url = new URL(base)
  url.pathname = `/${name}`
  return url.toString()
}
// This run's own databases. Each logical shard must have exactly ONE source: the in-process
// generator and next_id() would make the same (time, shard, sequence) IDs for the same shard,
// so the in-process modes write their own copy of the tables.
const database = `${option('database', 'sf_drizzle_example')}_${process.pid}`
const databases = { main: database, inProcess: `${database}_inproc` }
const admin = new pg.Client({ connectionString: base.toString() })
await admin.connect()
for (const name of Object.values(databases)) {
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${name}`)
  const client = new pg.Client({ connectionString: urlOf(name) })
  await client.connect()
  for (const sql of schemaSql) await client.query(sql)
  await client.end()
}

// The INSERTs' connections only ever run INSERTs, in both databases: a server process that ran
// one large statement (the install script) keeps its freed memory and pays about 4 ms less CPU
// per 1000-row INSERT than a fresh one (measured with the Kysely benchmark), so the install and
// the database sources' next_ids() calls have a pool of their own.
const pools = {
  main: new pg.Pool({ connectionString: urlOf(databases.main), max: 4 }),
  inProcess: new pg.Pool({ connectionString: urlOf(databases.inProcess), max: 4 }),
  ids: new pg.Pool({ connectionString: urlOf(databases.main), max: 4 }),
}
/** PostgreSQL's server processes serving the pools (their pids). */
const backends = new Set<number>()
for (const pool of Object.values(pools)) {
  // The server processes behind the pools, for the server's CPU time per INSERT.
  pool.on('connect', (client) => {
    backends.add((client as pg.PoolClient & { processID: number }).processID)
  })
}
/**
 * CPU time the pools' server processes have run, in ms, from `/proc/<pid>/schedstat`: only on
 * the database's machine (else 0). INSERTs run one at a time, so the difference around one is
 * the server's work for it (parse, bind, insert, index, commit), without waiting for a core.
 */
function serverCpuMs(): number {
  let ns = 0
  for (const pid of backends) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0])
    } catch {
      backends.delete(pid) // ended, or not on this machine
    }
  }
  return ns / 1e6
}
await installPostgres(pools.ids, { sharding, shards: 'all' })
/** The pool as the database sources see it, counting their round trips (next_ids() calls). */
let roundTrips = 0
const counted: SqlClient = {
  query: (text, params) => {
    roundTrips++
    return pools.ids.query(text, params)
  },
}
const inProcess = new InProcessSource({ sharding, shards: 'all' })
const prefetched = new PostgresSource({
  sharding,
  databases: counted,
  prefetch: { size: prefetchSize, maxAgeMs: prefetchMaxAgeMs },
})
const direct = new PostgresSource({ sharding, databases: counted })

const dbs = {
  main: drizzle({ client: pools.main }),
  inProcess: drizzle({ client: pools.inProcess }),
}
/** Each source with its own table objects, bound by its own shardedIds() (one source a column). */
const bind = (db: (typeof dbs)['main'], source: typeof inProcess | typeof direct) => {
  const tables = shardedTables()
  return { db, tables, ids: shardedIds(db, { source, schema: tables }) }
}
const sharded = {
  inProcess: bind(dbs.inProcess, inProcess),
  prefetched: bind(dbs.main, prefetched),
  direct: bind(dbs.main, direct),
}

// Existing authors, the same emails in every key scheme and database.
const emails = Array.from({ length: 16 }, (_, i) => `author${i}@example.com`)
const authorIds = {
  identity: (
    await dbs.main
      .insert(autoAuthors)
      .values(emails.map((email) => ({ email })))
      .returning({ id: autoAuthors.id })
  ).map((row) => row.id),
  main: [] as bigint[],
  inProcess: [] as bigint[],
}
for (const [name, { db, tables, ids }] of [
  ['main', sharded.direct],
  ['inProcess', sharded.inProcess],
] as const) {
  const rows = await ids.assign(
    tables.authors,
    emails.map((email) => ({ email })),
  )
  await db.insert(tables.authors).values(rows)
  authorIds[name] = rows.map((row) => row.id!)
}

type Mode = 'identity' | 'in-process' | '$defaultFn' | 'database' | 'db, no prefetch'
const names: Mode[] = ['identity', 'in-process', '$defaultFn', 'database', 'db, no prefetch']

/** This process's CPU time and the server's in the last {@link insert}, in ms. */
let lastCpuMs = 0
let lastServerMs = 0

/** One INSERT of `size` posts, spread over `authorsPerInsert` authors; returns its ms. */
async function insert(mode: Mode, size: number, seed: number): Promise<number> {
  const list =
    mode === 'identity'
      ? authorIds.identity
      : mode === 'in-process' || mode === '$defaultFn'
        ? authorIds.inProcess
        : authorIds.main
  // A scope has one shard: the $defaultFn mode writes one author's rows per INSERT.
  const spread = mode === '$defaultFn' ? 1 : authorsPerInsert
  const rows = Array.from({ length: size }, (_, i) => ({
    authorId: list[(seed + (i % spread)) % list.length]!,
    title: `post ${i}`,
  }))
  const { db, tables, ids } =
    mode === 'database'
      ? sharded.prefetched
      : mode === 'db, no prefetch'
        ? sharded.direct
        : sharded.inProcess
  const server = serverCpuMs()
  const cpu = process.cpuUsage()
  const started = performance.now()
  let returned: unknown[]
  if (mode === 'identity') {
    returned = await dbs.main.insert(autoPosts).values(rows).returning({ id: autoPosts.id })
  } else if (mode === '$defaultFn') {
    // The scope's shard is the author's: co-located without an assign step. The query runs
    // (and $defaultFn with it) when awaited, so it is awaited inside the scope.
    returned = await requestShard.run(
      sharding.shardOfId(rows[0]!.authorId),
      async () =>
        await db.insert(tables.scopedPosts).values(rows).returning({ id: tables.scopedPosts.id }),
    )
  } else {
    const assigned = await ids.assign(tables.posts, rows)
    await db.insert(tables.posts).values(assigned)
    returned = assigned
  }
  const elapsed = performance.now() - started
  const used = process.cpuUsage(cpu)
  lastCpuMs = (used.user + used.system) / 1000
  lastServerMs = serverCpuMs() - server
  if (returned.length !== size) throw new Error(`${mode}: ${returned.length} rows, not ${size}`)
  return elapsed
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

interface Result {
  size: number
  mode: Mode
  rowsPerSecond: number
  ratio: number
  ratioMin: number
  ratioMax: number
  p50Ms: number
  p99Ms: number
  /** This process's CPU time per INSERT (median): assigning, building, sending, reading back. */
  cpuMsPerInsert: number
  /** The server processes' CPU time per INSERT (median), next_ids() calls included. */
  serverCpuMsPerInsert: number
  roundTripsPerInsert: number | null
}
const results: Result[] = []
/** Every round's rows/s, per INSERT size and mode, for `--chart`. */
const perRound: { size: number; mode: Mode; values: number[] }[] = []
let seed = 0

for (const size of sizes) {
  const inserts = insertsPerRound(size)
  const throughput = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const ratios = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const latencies = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const cpuTimes = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const serverTimes = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const calls = new Map<Mode, number>(names.map((mode) => [mode, 0]))
  for (let round = 0; round <= rounds; round++) {
    const total = new Map<Mode, number>(names.map((mode) => [mode, 0]))
    for (let n = 0; n < inserts; n++) {
      seed++
      // Every mode does the same INSERT back to back, in a shuffled order.
      for (const mode of shuffled(names, seed)) {
        const before = roundTrips
        const elapsed = await insert(mode, size, seed)
        if (round === 0) continue // warm-up
        total.set(mode, total.get(mode)! + elapsed)
        latencies.get(mode)!.push(elapsed)
        cpuTimes.get(mode)!.push(lastCpuMs)
        serverTimes.get(mode)!.push(lastServerMs)
        calls.set(mode, calls.get(mode)! + roundTrips - before)
      }
    }
    if (round === 0) continue
    for (const mode of names) {
      throughput.get(mode)!.push((size * inserts) / (total.get(mode)! / 1000))
      ratios.get(mode)!.push(total.get('identity')! / total.get(mode)!)
    }
  }
  for (const mode of names) {
    perRound.push({ size, mode, values: throughput.get(mode)! })
    const modeRatios = ratios.get(mode)!
    results.push({
      size,
      mode,
      rowsPerSecond: Math.round(median(throughput.get(mode)!)),
      ratio: Number(median(modeRatios).toFixed(3)),
      ratioMin: Number(Math.min(...modeRatios).toFixed(3)),
      ratioMax: Number(Math.max(...modeRatios).toFixed(3)),
      p50Ms: Number(percentile(latencies.get(mode)!, 50).toFixed(2)),
      p99Ms: Number(percentile(latencies.get(mode)!, 99).toFixed(2)),
      cpuMsPerInsert: Number(median(cpuTimes.get(mode)!).toFixed(3)),
      serverCpuMsPerInsert: Number(median(serverTimes.get(mode)!).toFixed(3)),
      roundTripsPerInsert:
        mode === 'database' || mode === 'db, no prefetch'
          ? Number((calls.get(mode)! / (rounds * inserts)).toFixed(2))
          : null,
    })
  }
}

const loads = [loadAtStart, loadavg()[0]!]
if (chartFile) {
  const chart = {
    title: 'Drizzle inserts on PostgreSQL: sharded keys against an identity column',
    unit: 'rows/s',
    note: [
      `${new Date().toISOString().slice(0, 10)}, Drizzle ${npmVersion}, ${rounds} rounds after a warm-up, ${authorsPerInsert} ${authorsPerInsert === 1 ? 'author' : 'authors'} per INSERT, prefetch ${prefetchSize}, Node ${process.versions.node}`,
      `Load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)} on ${availableParallelism()} cores at the start and end of the run`,
    ],
    baseline: 'identity',
    rows: perRound.map(({ size, mode, values }) => ({
      label: mode,
      group: size === 1 ? 'One row per INSERT' : `${size} rows per INSERT`,
      values: values.map((value) => Number(value.toPrecision(4))),
    })),
  }
  writeFileSync(chartFile, JSON.stringify(chart))
}

/** Co-location, decoded from the IDs as stored: every post on its author's shard. */
const coLocation = { posts: 0, misplaced: 0 }
for (const pool of [pools.main, pools.inProcess]) {
  const pairs = await pool.query<{ child: string; parent: string }>(
    `SELECT id::text AS child, author_id::text AS parent FROM posts
     UNION ALL SELECT id::text, author_id::text FROM scoped_posts`,
  )
  for (const { child, parent } of pairs.rows) {
    coLocation.posts++
    if (sharding.shardOfId(child) !== sharding.shardOfId(parent)) coLocation.misplaced++
  }
}

const targets = {
  inProcess: results.filter((r) => r.mode === 'in-process').every((r) => r.ratio >= 0.95),
  databaseWithPrefetch: results.filter((r) => r.mode === 'database').every((r) => r.ratio >= 0.9),
}
if (json) {
  console.log(
    stringifyIds(
      {
        drizzle: npmVersion,
        rounds,
        insertsPerRound: Object.fromEntries(sizes.map((size) => [size, insertsPerRound(size)])),
        authorsPerInsert,
        prefetch: prefetchSize,
        logicalShards,
        load: loads,
        results,
        coLocation,
        targetsMet: targets,
      },
      2,
    ),
  )
} else {
  console.log(
    `Drizzle ${npmVersion} + PostgreSQL: INSERTs of posts, ${rounds} rounds, medians; ratio = rows/s vs identity in the same round (min..max)\n`,
  )
  console.log(
    `${'rows'.padStart(5)}  ${'mode'.padEnd(15)} ${'rows/s'.padStart(9)} ${'ratio'.padStart(6)} ${'(min..max)'.padEnd(13)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'cpu ms'.padStart(7)} ${'srv ms'.padStart(7)}  round trips/INSERT`,
  )
  for (const r of results) {
    console.log(
      `${String(r.size).padStart(5)}  ${r.mode.padEnd(15)} ${String(r.rowsPerSecond).padStart(9)} ${r.ratio.toFixed(2).padStart(6)} ${`(${r.ratioMin.toFixed(2)}..${r.ratioMax.toFixed(2)})`.padEnd(13)} ${r.p50Ms.toFixed(2).padStart(8)} ${r.p99Ms.toFixed(2).padStart(8)} ${r.cpuMsPerInsert.toFixed(2).padStart(7)} ${r.serverCpuMsPerInsert.toFixed(2).padStart(7)}  ${r.roundTripsPerInsert ?? '-'}`,
    )
  }
  console.log(
    `\ntargets: in-process >= 0.95x: ${targets.inProcess ? 'met' : 'NOT met'}; database source with prefetch >= 0.9x: ${targets.databaseWithPrefetch ? 'met' : 'NOT met'}`,
  )
}
console.error(
  `co-location: ${coLocation.posts} posts decoded, ${coLocation.misplaced} off their author's shard`,
)

for (const { ids } of Object.values(sharded)) ids.close()
await prefetched.close()
await direct.close()
await inProcess.close()
for (const pool of Object.values(pools)) await pool.end()
for (const name of Object.values(databases)) await admin.query(`DROP DATABASE IF EXISTS ${name}`)
await admin.end()
