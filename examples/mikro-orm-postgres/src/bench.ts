/**
 * Units of work on MikroORM + PostgreSQL: flushes of 1, 10 and 1000 new entities (posts, each
 * with a comment, by existing authors), with shardflake keys against the same entities with
 * BIGSERIAL keys, in the same run, alternating, medians of several rounds.
 *
 *   node src/bench.ts [--json] [--quick] [--sizes=1,10,1000] [--rounds=7] [--database=sf_mikro_example]
 *     [--prefetch-size=100] [--prefetch-max-age-ms=1000] [--chart <file>]   (after `pnpm build`; PG_URL elsewhere;
 *   AUTHORS_PER_FLUSH=4 spreads each flush over 4 authors, so 4 shards)
 *
 * `--chart <file>` also writes every round's entities/s for bench-charts (see
 * bench-charts/README.md): one group per flush size, each mode against autoincrement.
 *
 * Modes:
 * - autoincrement: BIGSERIAL keys, the baseline
 * - in-process:    InProcessSource, IDs at em.create()
 * - database:      PostgresSource (next_ids() in the database) with `prefetch: { size: 100 }`, IDs in
 *                  onFlush: IDs fetched ahead serve small flushes, a round trip every ~100 IDs per shard
 * - db, no prefetch: the same source without prefetch: one round trip per shard per flush
 * - beforeCreate:  the source without prefetch from a per-entity beforeCreate hook, one round trip
 *                  per entity (what onFlush avoids; shown for comparison, not shipped)
 */
import { writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { type EntityManager, type EventArgs, MikroORM } from '@mikro-orm/postgresql'
import { defineSharding, InProcessSource, instagram, stringifyIds } from '@shardflake/core'
import { ShardedIdSubscriber, shardedIds } from '@shardflake/mikro-orm'
import { installPostgres, PostgresSource, type SqlClient } from '@shardflake/postgres'
import pg from 'pg'
import { Author, AutoAuthor, AutoComment, AutoPost, Comment, Post, schema } from './entities.ts'

const json = process.argv.includes('--json')
const quick = process.argv.includes('--quick')
const logicalShards = 64
/** The application's sharding, handed to every source and to shardedIds(). */
const sharding = defineSharding({ layout: instagram, logicalShards })
// This run's own database names: two runs never drop each other's.
const database = `${
  process.argv.find((arg) => arg.startsWith('--database='))?.slice('--database='.length) ??
  'sf_mikro_example'
}_${process.pid}`
const sizes = (
  process.argv.find((arg) => arg.startsWith('--sizes='))?.slice('--sizes='.length) ?? '1,10,1000'
)
  .split(',')
  .map(Number)
/** Flushes per round: about 400 entities per mode and round (100 in quick runs), at least 3 (1). */
const flushesPerRound = (size: number) =>
  Math.max(quick ? 1 : 3, Math.round((quick ? 100 : 400) / size))
const rounds = Number(
  process.argv.find((arg) => arg.startsWith('--rounds='))?.slice('--rounds='.length) ??
    (quick ? 3 : 7),
)
const chartAt = process.argv.indexOf('--chart')
const chartFile = chartAt >= 0 ? process.argv[chartAt + 1] : undefined
const loadAtStart = loadavg()[0]!
/**
 * How long prefetched IDs stay usable. The test passes a long one so that a slow, shared machine
 * cannot turn the round-trip count into a timing measurement.
 */
const prefetchSize = Number(
  process.argv.find((arg) => arg.startsWith('--prefetch-size='))?.split('=')[1] ?? 100,
)
const prefetchMaxAgeMs = Number(
  process.argv.find((arg) => arg.startsWith('--prefetch-max-age-ms='))?.split('=')[1] ?? 1000,
)
const authorsPerFlush = Number(process.env.AUTHORS_PER_FLUSH ?? 1)

/** The naive alternative: an async beforeCreate hook, which MikroORM awaits entity by entity. */
class PerEntityBeforeCreate extends ShardedIdSubscriber {
  override async onFlush(): Promise<void> {}

  async beforeCreate({ entity, meta }: EventArgs<object>): Promise<void> {
    const row = entity as Record<string, unknown>
    const key = meta.primaryKeys[0]!
    if (row[key] == null) row[key] = await this.source.nextId(this.placement.shardOf(entity, meta))
  }
}

const base = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
const urlOf = (name: string) => {
  const url = new URL(base)
  url.pathname = `/${name}`
  return url.toString()
}
// Two databases: each logical shard must have exactly ONE source. The in-process generator and
// next_id() would make the same (time, shard, sequence) IDs for the same shard, so the
// in-process mode writes its own copy of the tables.
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
const pool = new pg.Pool({ connectionString: urlOf(databases.main), max: 8 })
await installPostgres(pool, { sharding, shards: 'all' })

const inProcess = new InProcessSource({ sharding, shards: 'all' })
/** The pool as the database sources see it, counting their round trips (next_ids() calls). */
let roundTrips = 0
const counted: SqlClient = {
  query: (text, params) => {
    roundTrips++
    return pool.query(text, params)
  },
}
const prefetched = new PostgresSource({
  sharding,
  databases: counted,
  prefetch: { size: prefetchSize, maxAgeMs: prefetchMaxAgeMs },
})
const direct = new PostgresSource({ sharding, databases: counted })
const sharded = [Author, Post, Comment]
const open = (entities: unknown[], extensions: ShardedIdSubscriber[], name = databases.main) =>
  MikroORM.init({
    clientUrl: urlOf(name),
    entities: entities as typeof sharded,
    extensions,
    pool: { max: 8 },
  })

const modes = {
  autoincrement: await open([AutoAuthor, AutoPost, AutoComment], []),
  'in-process': await open(sharded, [shardedIds({ source: inProcess })], databases.inProcess),
  database: await open(sharded, [shardedIds({ source: prefetched })]),
  'db, no prefetch': await open(sharded, [shardedIds({ source: direct })]),
  beforeCreate: await open(sharded, [new PerEntityBeforeCreate({ source: direct })]),
}
type Mode = keyof typeof modes

// Existing authors, the same emails in every key scheme and database.
const emails = Array.from({ length: 16 }, (_, i) => `author${i}@example.com`)
const authorIds = { auto: [] as bigint[], inProcess: [] as bigint[], database: [] as bigint[] }
{
  const auto = modes.autoincrement.em.fork()
  const autoMade = emails.map((email) => auto.create(AutoAuthor, { email }))
  await auto.flush()
  authorIds.auto = autoMade.map((author) => author.id)
  for (const [mode, list] of [
    ['in-process', 'inProcess'],
    ['database', 'database'],
  ] as const) {
    const em = modes[mode].em.fork()
    const made = emails.map((email) => em.create(Author, { email }))
    await em.flush()
    authorIds[list] = made.map((author) => author.id)
  }
}

/** One unit of work: ceil(size/2) posts and floor(size/2) comments, one flush. */
async function unitOfWork(mode: Mode, size: number, seed: number): Promise<number> {
  const em: EntityManager = modes[mode].em.fork()
  const auto = mode === 'autoincrement'
  const ids = auto
    ? authorIds.auto
    : mode === 'in-process'
      ? authorIds.inProcess
      : authorIds.database
  const posts = Math.ceil(size / 2)
  const comments = size - posts
  const started = performance.now()
  const authorOf = (i: number) => ids[(seed + (i % authorsPerFlush)) % ids.length]!
  if (auto) {
    const made = Array.from({ length: posts }, (_, i) =>
      em.create(AutoPost, { author: em.getReference(AutoAuthor, authorOf(i)), title: `post ${i}` }),
    )
    for (let i = 0; i < comments; i++)
      em.create(AutoComment, { post: made[i]!, body: `comment ${i}` })
  } else {
    const made = Array.from({ length: posts }, (_, i) =>
      em.create(Post, { author: em.getReference(Author, authorOf(i)), title: `post ${i}` }),
    )
    for (let i = 0; i < comments; i++) em.create(Comment, { post: made[i]!, body: `comment ${i}` })
  }
  await em.flush()
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

interface Result {
  size: number
  mode: Mode
  entitiesPerSecond: number
  ratio: number
  p50Ms: number
  p99Ms: number
  roundTripsPerFlush: number | null
}
const results: Result[] = []
/** Every round's entities/s, per flush size and mode, for `--chart`. */
const perRound: { size: number; mode: Mode; values: number[] }[] = []
const names = Object.keys(modes) as Mode[]
let seed = 0

for (const size of sizes) {
  const flushes = flushesPerRound(size)
  const throughput = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const ratios = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const latencies = new Map<Mode, number[]>(names.map((mode) => [mode, []]))
  const calls = new Map<Mode, number>(names.map((mode) => [mode, 0]))
  for (let round = 0; round <= rounds; round++) {
    const total = new Map<Mode, number>(names.map((mode) => [mode, 0]))
    for (let f = 0; f < flushes; f++) {
      seed++
      // Every mode does the same unit of work back to back, in a rotating order.
      for (let i = 0; i < names.length; i++) {
        const mode = names[(i + seed) % names.length]!
        const before = roundTrips
        const elapsed = await unitOfWork(mode, size, seed)
        if (round === 0) continue // warm-up
        total.set(mode, total.get(mode)! + elapsed)
        latencies.get(mode)!.push(elapsed)
        calls.set(mode, calls.get(mode)! + roundTrips - before)
      }
    }
    if (round === 0) continue
    for (const mode of names) {
      const perSecond = (size * flushes) / (total.get(mode)! / 1000)
      throughput.get(mode)!.push(perSecond)
      ratios.get(mode)!.push(total.get('autoincrement')! / total.get(mode)!)
    }
  }
  for (const mode of names) perRound.push({ size, mode, values: throughput.get(mode)! })
  for (const mode of names) {
    results.push({
      size,
      mode,
      entitiesPerSecond: Math.round(median(throughput.get(mode)!)),
      ratio: Number(median(ratios.get(mode)!).toFixed(3)),
      p50Ms: Number(percentile(latencies.get(mode)!, 50).toFixed(2)),
      p99Ms: Number(percentile(latencies.get(mode)!, 99).toFixed(2)),
      roundTripsPerFlush:
        mode === 'database' || mode === 'db, no prefetch' || mode === 'beforeCreate'
          ? Number((calls.get(mode)! / (rounds * flushes)).toFixed(1))
          : null,
    })
  }
}

if (chartFile) {
  const loads = [loadAtStart, loadavg()[0]!]
  const chart = {
    title: 'MikroORM flushes on PostgreSQL: sharded keys against BIGSERIAL',
    unit: 'entities/s',
    note: [
      `${new Date().toISOString().slice(0, 10)}, ${rounds} rounds after a warm-up, about ${quick ? 100 : 400} entities per mode and round, ${authorsPerFlush} ${authorsPerFlush === 1 ? 'author' : 'authors'} per flush, Node ${process.versions.node}`,
      `Load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)} on ${availableParallelism()} cores at the start and end of the run`,
    ],
    baseline: 'autoincrement',
    rows: perRound.map(({ size, mode, values }) => ({
      label: mode,
      group: `Flushes of ${size} ${size === 1 ? 'entity' : 'entities'}`,
      values: values.map((value) => Number(value.toPrecision(4))),
    })),
  }
  writeFileSync(chartFile, JSON.stringify(chart))
}

const check = {
  inProcess: results.filter((r) => r.mode === 'in-process').every((r) => r.ratio >= 0.95),
  databaseFlushesOf10AndMore: results
    .filter((r) => r.mode === 'database' && r.size >= 10)
    .every((r) => r.ratio >= 0.9),
  noPrefetchFlushesOf10AndMore: results
    .filter((r) => r.mode === 'db, no prefetch' && r.size >= 10)
    .every((r) => r.ratio >= 0.9),
}

/**
 * Co-location, decoded from the IDs as stored: every post on its author's shard, every comment
 * on its post's, in both databases with sharded keys.
 */
const coLocation = { posts: 0, comments: 0, misplaced: 0 }
for (const name of [databases.main, databases.inProcess]) {
  const client = new pg.Client({ connectionString: urlOf(name) })
  await client.connect()
  const pairs = await client.query<{ kind: string; child: string; parent: string }>(
    `SELECT 'post' AS kind, id::text AS child, author_id::text AS parent FROM posts
     UNION ALL SELECT 'comment', id::text, post_id::text FROM comments`,
  )
  await client.end()
  for (const { kind, child, parent } of pairs.rows) {
    if (kind === 'post') coLocation.posts++
    else coLocation.comments++
    if (sharding.shardOfId(child) !== sharding.shardOfId(parent)) coLocation.misplaced++
  }
}

if (json) {
  console.log(
    stringifyIds(
      {
        rounds,
        flushesPerRound: Object.fromEntries(sizes.map((size) => [size, flushesPerRound(size)])),
        authorsPerFlush,
        logicalShards,
        results,
        coLocation,
        targetsMet: check,
      },
      2,
    ),
  )
} else {
  console.log(
    `MikroORM 7 + PostgreSQL: units of work (posts + comments), ${rounds} rounds, medians; ratio = entities/s vs autoincrement in the same round\n`,
  )
  console.log(
    `${'flush'.padStart(5)}  ${'mode'.padEnd(15)} ${'entities/s'.padStart(10)} ${'ratio'.padStart(6)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)}  round trips/flush`,
  )
  for (const r of results) {
    console.log(
      `${String(r.size).padStart(5)}  ${r.mode.padEnd(15)} ${String(r.entitiesPerSecond).padStart(10)} ${r.ratio.toFixed(2).padStart(6)} ${r.p50Ms.toFixed(2).padStart(8)} ${r.p99Ms.toFixed(2).padStart(8)}  ${r.roundTripsPerFlush ?? '-'}`,
    )
  }
  console.log(
    `\ntargets: in-process >= 0.95x: ${check.inProcess ? 'met' : 'NOT met'}; database source >= 0.9x for flushes of 10+: ${check.databaseFlushesOf10AndMore ? 'met' : 'NOT met'} (without prefetch: ${check.noPrefetchFlushesOf10AndMore ? 'met' : 'NOT met'})`,
  )
}

console.error(
  `co-location: ${coLocation.posts} posts and ${coLocation.comments} comments decoded, ${coLocation.misplaced} off their parent's shard`,
)
for (const orm of Object.values(modes)) await orm.close(true)
await prefetched.close()
await direct.close()
inProcess.close()
await pool.end()
for (const name of Object.values(databases)) await admin.query(`DROP DATABASE IF EXISTS ${name}`)
await admin.end()
