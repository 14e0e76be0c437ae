/**
 * Inserts through Kysely on PostgreSQL: single rows and batches of 1000, with keys from the
 * shardflake plugin against the same tables with BIGSERIAL keys, in the same run, alternating,
 * medians of several rounds with the smallest and largest round.
 *
 *   node src/bench.ts [--json] [--quick] [--sizes=1,1000] [--rounds=7] [--database=sf_kysely_example]
 *     [--authors=16] [--prefetch-size=100] [--prefetch-max-age-ms=1000] [--chart <file>]
 *   (after `pnpm build`; PG_URL elsewhere; AUTHORS_PER_INSERT=16 spreads each batch over 16
 *   authors, so 16 shards)
 *
 * Each insert is by the next of `--authors` existing authors in turn (16: 16 shards), so a
 * shard's prefetch buffer is used by one insert in 16.
 *
 * Each insert's wall time and this process's CPU time around it are kept: the CPU time is the
 * client's own cost (the plugin's among it), which load on a shared machine stretches in wall time.
 *
 * `--chart <file>` also writes every round's rows/s for bench-charts (see bench-charts/README.md):
 * one group per insert size, each mode against autoincrement.
 *
 * Modes (every insert is `.values(rows).returning('id')`, so every mode hands back its keys):
 * - autoincrement:      BIGSERIAL keys, no plugin: the baseline
 * - in-process:         InProcessSource, the plugin and its dialect: keys filled as Kysely compiles
 * - in-process, plugin: the same source with the plugin alone (`db.withPlugin(ids)`)
 * - in-process, async:  the same source behind promises through the dialect: the path every
 *                       asynchronous source takes (pending keys filled as the query runs)
 * - ids given:          the same generator's IDs made before the clock starts and inserted with
 *                       no plugin: what carrying a 64-bit key in the INSERT costs by itself
 * - db ids given:       the same with the database source's IDs (next_ids(), no prefetch) into the
 *                       database modes' table
 * - ids given, db table, db ids given, in-proc table: the two crossed, each on shards no other
 *                       mode uses: whether a cost follows the IDs or the table
 * - database:           PostgresSource (next_ids() in the database) with `prefetch: { size: 100 }`
 *                       (`--prefetch-size`, `--prefetch-max-age-ms`); a buffer refills in the
 *                       background once fewer than half of size are left
 * - db, no refill ahead: the same buffer with `refillAhead: false`: fetches only when it runs short
 * - db, no prefetch:    the same source without prefetch: one next_ids() round trip per insert
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import {
  allocateIds,
  defineSharding,
  type IdSource,
  InProcessSource,
  instagram,
  stringifyIds,
} from '@shardflake/core'
import { shardedIds } from '@shardflake/kysely'
import { installPostgres, PostgresSource, type SqlClient } from '@shardflake/postgres'
import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { shuffled } from '../../../bench-charts/src/shuffle.ts'
import { type Database, schema, tables } from './schema.ts'

const json = process.argv.includes('--json')
const quick = process.argv.includes('--quick')
const option = (name: string) =>
  process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const logicalShards = 64
/** The application's sharding, handed to every source. */
const sharding = defineSharding({ layout: instagram, logicalShards })
// This run's own database names: two runs never drop each other's.
const database = `${option('database') ?? 'sf_kysely_example'}_${process.pid}`
const sizes = (option('sizes') ?? '1,1000').split(',').map(Number)
/** Inserts per mode and round: about 400 rows (100 in quick runs), at least 20 inserts (1). */
const insertsPerRound = (size: number) =>
  Math.max(quick ? 1 : 20, Math.round((quick ? 100 : 400) / size))
const rounds = Number(option('rounds') ?? (quick ? 3 : 7))
const chartAt = process.argv.indexOf('--chart')
const chartFile = chartAt >= 0 ? process.argv[chartAt + 1] : undefined
const loadAtStart = loadavg()[0]!
/**
 * How long prefetched IDs stay usable. The test passes a long one so that a slow, shared machine
 * cannot turn the round-trip count into a timing measurement.
 */
const prefetchMaxAgeMs = Number(option('prefetch-max-age-ms') ?? 1000)
/** How many IDs one round trip of the prefetching source fetches ahead. */
const prefetchSize = Number(option('prefetch-size') ?? 100)
const authorsPerInsert = Number(process.env.AUTHORS_PER_INSERT ?? 1)
/** How many authors (so shards) the inserts take turns over. */
const authorCount = Number(option('authors') ?? 16)

const base = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
const urlOf = (name: string) => {
  const url = new URL(base)
  url.pathname = `/${name}`
  return url.toString()
}
// Two databases: each logical shard must have exactly ONE source. The in-process generator and
// next_id() would make the same (time, shard, sequence) IDs for the same shard, so the
// in-process modes write their own copy of the tables.
const databases = { main: database, inProcess: `${database}_inproc` }
const admin = new pg.Client({ connectionString: base.toString() })
await admin.connect()
for (const name of Object.values(databases)) {
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${name}`)
  const client = new pg.Client({ connectionString: urlOf(name) })
  await client.connect()
  for (const sql of schema) await client.query(sql)
  await client.end()
}
// The INSERTs' connections only ever run INSERTs, in both databases: a server process that ran
// one large statement (the install script) keeps its freed memory and pays about 4 ms less CPU
// per 1000-row INSERT than a fresh one (src/backend-memory.ts), so the install and the database
// sources' next_ids() calls have a pool of their own.
const pools = {
  main: new pg.Pool({ connectionString: urlOf(databases.main), max: 8 }),
  inProcess: new pg.Pool({ connectionString: urlOf(databases.inProcess), max: 8 }),
  ids: new pg.Pool({ connectionString: urlOf(databases.main), max: 4 }),
}
for (const pool of Object.values(pools)) {
  pool.on('error', () => undefined) // idle connections ended
  // The server processes behind the pools, for the server's CPU time per insert.
  pool.on('connect', (client) => {
    backends.add((client as pg.PoolClient & { processID: number }).processID)
  })
}
/** PostgreSQL's server processes serving the pools (their pids). */
const backends = new Set<number>()
/**
 * CPU time the pools' server processes have run, in ms, from `/proc/<pid>/schedstat`: only on
 * the database's machine (else 0). Inserts run one at a time, so the difference around one is
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

const inProcess = new InProcessSource({ sharding, shards: 'all' })
/** The pool as the database sources see it, counting their round trips (next_ids() calls). */
let roundTrips = 0
const counted: SqlClient = {
  query: (text, params) => {
    roundTrips++
    return pools.ids.query(text, params)
  },
}
const prefetched = new PostgresSource({
  sharding,
  databases: counted,
  prefetch: { size: prefetchSize, maxAgeMs: prefetchMaxAgeMs },
})
/** The same buffer without fetching ahead: a shard's buffer that runs short waits for its fetch. */
const waiting = new PostgresSource({
  sharding,
  databases: counted,
  prefetch: { size: prefetchSize, maxAgeMs: prefetchMaxAgeMs, refillAhead: false },
})
const direct = new PostgresSource({ sharding, databases: counted })
/** The in-process generator behind promises: what an asynchronous source costs without a server. */
const deferred: IdSource = {
  sharding,
  synchronous: false,
  nextId: async (shard) => inProcess.nextId(shard),
  nextIds: async (shard, count) => inProcess.nextIds(shard, count),
  close: () => undefined,
}

/** Kysely on one pool: no plugin, the plugin alone, or the plugin with its dialect. */
function open(pool: pg.Pool, source?: IdSource, setup: 'plugin' | 'dialect' = 'dialect') {
  const dialect = new PostgresDialect({ pool })
  if (!source) return new Kysely<Database>({ dialect })
  const ids = shardedIds<Database>({ source, tables })
  if (setup === 'plugin') return new Kysely<Database>({ dialect }).withPlugin(ids)
  return new Kysely<Database>({ dialect: ids.dialect(dialect), plugins: [ids] })
}

const modes = {
  autoincrement: open(pools.main),
  'in-process': open(pools.inProcess, inProcess),
  'in-process, plugin': open(pools.inProcess, inProcess, 'plugin'),
  'in-process, async': open(pools.inProcess, deferred),
  'ids given': open(pools.inProcess),
  'db ids given': open(pools.main),
  'ids given, db table': open(pools.main),
  'db ids given, in-proc table': open(pools.inProcess),
  database: open(pools.main, prefetched),
  'db, no refill ahead': open(pools.main, waiting),
  'db, no prefetch': open(pools.main, direct),
}
type Mode = keyof typeof modes
const names = Object.keys(modes) as Mode[]
const isAuto = (mode: Mode) => mode === 'autoincrement'
/** The modes whose IDs the in-process generator makes: they write the in-process database. */
const isInProcess = (mode: Mode) => mode.startsWith('in-process') || mode === 'ids given'
/** The modes that insert IDs made before the clock starts, without the plugin. */
const isGiven = (mode: Mode) => mode.includes('ids given')
/** The given IDs' source: the in-process generator or the database's next_ids(). */
const givenByInProcess = (mode: Mode) => mode.startsWith('ids given')

// Existing authors, the same emails in every key scheme and database.
const emails = Array.from({ length: authorCount }, (_, i) => `author${i}@example.com`)
const authorIds = {
  auto: (
    await modes.autoincrement
      .insertInto('auto_authors')
      .values(emails.map((email) => ({ email })))
      .returning('id')
      .execute()
  ).map((row) => row.id),
  inProcess: (
    await modes['in-process']
      .insertInto('authors')
      .values(emails.map((email) => ({ email })))
      .returning('id')
      .execute()
  ).map((row) => row.id),
  database: (
    await modes.database
      .insertInto('authors')
      .values(emails.map((email) => ({ email })))
      .returning('id')
      .execute()
  ).map((row) => row.id),
}
// The crossed modes' authors, on shards no other mode uses, so that the generator writing into
// the other database's table is the only one making IDs for them there.
const used = new Set(
  [...authorIds.inProcess, ...authorIds.database].map((id) => sharding.shardOfId(id)),
)
const free = Array.from({ length: logicalShards }, (_, shard) => shard).filter((s) => !used.has(s))
const half = Math.min(authorCount, free.length >> 1)
async function crossAuthors(pool: pg.Pool, shards: number[], tag: string): Promise<string[]> {
  const ids = shards.map((shard) => sharding.layout.composeTime(1, shard, 0, 0).toString())
  for (const [i, id] of ids.entries()) {
    await pool.query('INSERT INTO authors (id, email) VALUES ($1, $2)', [
      id,
      `${tag}${i}@example.com`,
    ])
  }
  return ids
}
const crossIds = {
  main: await crossAuthors(pools.main, free.slice(0, half), 'cross-a'),
  inProcess: await crossAuthors(pools.inProcess, free.slice(half, 2 * half), 'cross-b'),
}

/** CPU time this process spent in the last {@link insert}, in ms (its own work, not the server's). */
let lastCpuMs = 0
/** The server processes' CPU time in the last {@link insert}, in ms. */
let lastServerMs = 0

/** One INSERT of `size` posts (one statement, keys returned); the time it took in ms. */
async function insert(mode: Mode, size: number, seed: number): Promise<number> {
  const ids = isAuto(mode)
    ? authorIds.auto
    : mode === 'ids given, db table'
      ? crossIds.main
      : mode === 'db ids given, in-proc table'
        ? crossIds.inProcess
        : isInProcess(mode)
          ? authorIds.inProcess
          : authorIds.database
  const rows = Array.from({ length: size }, (_, i) => ({
    author_id: ids[(seed + (i % authorsPerInsert)) % ids.length]!,
    title: `post ${seed}.${i}`,
  }))
  // 'ids given', 'db ids given': keys made before the clock starts, inserted without the plugin.
  const made = isGiven(mode)
    ? await allocateIds(
        givenByInProcess(mode) ? inProcess : direct,
        rows.map((row) => sharding.shardOfId(row.author_id)),
      )
    : undefined
  const posts = made ? rows.map((row, i) => ({ ...row, id: made[i]! })) : rows
  const db = modes[mode]
  const server = serverCpuMs()
  const cpu = process.cpuUsage()
  const started = performance.now()
  if (isAuto(mode)) await db.insertInto('auto_posts').values(rows).returning('id').execute()
  else await db.insertInto('posts').values(posts).returning('id').execute()
  const elapsed = performance.now() - started
  const used = process.cpuUsage(cpu)
  lastCpuMs = (used.user + used.system) / 1000
  lastServerMs = serverCpuMs() - server
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
  /** This process's CPU time per insert (median): building, compiling, sending, reading back. */
  cpuMsPerInsert: number
  /** The server processes' CPU time per insert (median), next_ids() calls included. */
  serverCpuMsPerInsert: number
  roundTripsPerInsert: number | null
}
const results: Result[] = []
/** Every round's rows/s, per insert size and mode, for `--chart`. */
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
      // Every mode does the same insert back to back, in a shuffled order.
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
      ratios.get(mode)!.push(total.get('autoincrement')! / total.get(mode)!)
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
        mode === 'database' || mode === 'db, no refill ahead' || mode === 'db, no prefetch'
          ? Number((calls.get(mode)! / (rounds * inserts)).toFixed(2))
          : null,
    })
  }
}

if (chartFile) {
  const loads = [loadAtStart, loadavg()[0]!]
  const chart = {
    title: 'Kysely inserts on PostgreSQL: sharded keys from the plugin against BIGSERIAL',
    unit: 'rows/s',
    note: [
      `${new Date().toISOString().slice(0, 10)}, ${rounds} rounds after a warm-up; per mode and round ${sizes.map((size) => `${insertsPerRound(size)} inserts of ${size}`).join(', ')}; inserts by ${authorCount} authors in turn (${authorsPerInsert} per insert), prefetch ${prefetchSize} IDs kept ${prefetchMaxAgeMs} ms, Node ${process.versions.node}`,
      `Load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)} on ${availableParallelism()} cores at the start and end of the run`,
    ],
    baseline: 'autoincrement',
    rows: perRound.map(({ size, mode, values }) => ({
      label: mode,
      group: size === 1 ? 'Single-row inserts' : `${size}-row inserts`,
      values: values.map((value) => Number(value.toPrecision(4))),
    })),
  }
  writeFileSync(chartFile, JSON.stringify(chart))
}

const met = (mode: Mode, target: number) =>
  results.filter((r) => r.mode === mode).every((r) => r.ratio >= target)
const targetsMet = {
  inProcess: met('in-process', 0.95),
  databaseWithPrefetch: met('database', 0.9),
}

/** Co-location, decoded from the IDs as stored: every post on its author's shard. */
const coLocation = { posts: 0, misplaced: 0 }
for (const pool of [pools.main, pools.inProcess]) {
  const { rows } = await pool.query<{ id: string; author_id: string }>(
    'SELECT id::text, author_id::text FROM posts',
  )
  for (const { id, author_id } of rows) {
    coLocation.posts++
    if (sharding.shardOfId(id) !== sharding.shardOfId(author_id)) coLocation.misplaced++
  }
}

if (json) {
  console.log(
    stringifyIds(
      {
        rounds,
        insertsPerRound: Object.fromEntries(sizes.map((size) => [size, insertsPerRound(size)])),
        authors: authorCount,
        authorsPerInsert,
        logicalShards,
        results,
        coLocation,
        targetsMet,
      },
      2,
    ),
  )
} else {
  console.log(
    `Kysely + PostgreSQL: inserts with RETURNING id, ${rounds} rounds, medians; ratio = rows/s vs autoincrement in the same round (min..max over rounds)\n`,
  )
  console.log(
    `${'rows'.padStart(5)}  ${'mode'.padEnd(27)} ${'rows/s'.padStart(8)} ${'ratio'.padStart(6)} ${'min..max'.padStart(11)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'cpu ms'.padStart(7)} ${'srv ms'.padStart(7)}  round trips/insert`,
  )
  for (const r of results) {
    console.log(
      `${String(r.size).padStart(5)}  ${r.mode.padEnd(27)} ${String(r.rowsPerSecond).padStart(8)} ${r.ratio.toFixed(2).padStart(6)} ${`${r.ratioMin.toFixed(2)}..${r.ratioMax.toFixed(2)}`.padStart(11)} ${r.p50Ms.toFixed(2).padStart(8)} ${r.p99Ms.toFixed(2).padStart(8)} ${r.cpuMsPerInsert.toFixed(2).padStart(7)} ${r.serverCpuMsPerInsert.toFixed(2).padStart(7)}  ${r.roundTripsPerInsert ?? '-'}`,
    )
  }
  console.log(
    `\ntargets: in-process >= 0.95x: ${targetsMet.inProcess ? 'met' : 'NOT met'}; database source with prefetch >= 0.9x: ${targetsMet.databaseWithPrefetch ? 'met' : 'NOT met'}`,
  )
}

console.error(
  `co-location: ${coLocation.posts} posts decoded, ${coLocation.misplaced} off their author's shard`,
)
// The Kysely instances share the two pools, which this script owns and ends itself.
await prefetched.close()
await waiting.close()
await direct.close()
inProcess.close()
await pools.main.end()
await pools.inProcess.end()
await pools.ids.end()
for (const name of Object.values(databases)) {
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
}
await admin.end()
