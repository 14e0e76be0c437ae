/**
 * Prisma on PostgreSQL: users, posts and comments (comments on their post's shard) with sharded
 * IDs against `BigInt @id @default(autoincrement())`, in the same run, rounds alternating.
 *
 *   node src/bench.ts [--json] [--rounds 12] [--single 60] [--users 100]
 *                     [--prefetch 256] [--max-age 5000] [--prefix sf_prisma_example]
 *                     [--chart <file>]
 *
 * Every round runs, for each mode in turn (the order rotates), `--single` posts each followed by
 * a comment, one create at a time, then one `createMany` of 1000 posts and one of 1000 comments,
 * then one `createMany` of 1000 wide posts (7 columns besides the ID: what a real post carries;
 * the posts and comments here have 2). Ratios are the median over rounds of mode / autoincrement
 * in the same round: on a shared, noisy machine only paired, alternating measurements mean
 * anything.
 *
 * Modes, each in its own database (`sf_prisma_example_<mode>`) so no shard has two sources:
 * - `autoincrement`: the baseline, IDs from BIGSERIAL.
 * - `in-process`: `InProcessSource`, no round trip.
 * - `next_id() + prefetch`: `PostgresSource` with a prefetch buffer per shard (the way to use a
 *   database source with Prisma).
 * - `next_id()`: `PostgresSource`, one round trip per create (for reference).
 * - `app-assigned, no extension`: the same IDs set by hand (`bigint`) on a plain client: what
 *   sending an explicit BIGINT costs Prisma by itself.
 * - `app-assigned as strings, no extension`: the same, with `createMany` given the IDs as
 *   decimal strings, as the extension does: the ceiling for any assigned-before-INSERT scheme
 *   through `createMany` (single creates as in `app-assigned`).
 *
 * `--chart <file>` also writes every round's throughput for bench-charts (see
 * bench-charts/README.md): one group per kind of write, each mode against autoincrement.
 */
import { writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { PrismaPg } from '@prisma/adapter-pg'
import {
  defineSharding,
  type IdSource,
  InProcessSource,
  instagram,
  stringifyIds,
} from '@shardflake/core'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import pg from 'pg'
import { PrismaClient } from './generated/prisma/client.ts'
// The extension with this schema's models bound, written by `prisma generate`.
import { shardedIds } from './generated/shardflake/index.ts'

const argv = process.argv.slice(2)
const flag = (name: string, fallback: number) => {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 ? Number(argv[i + 1]) : fallback
}
const json = argv.includes('--json')
const rounds = flag('rounds', 12)
const singles = flag('single', 60)
const users = flag('users', 100)
// A createMany of 1000 rows over 64 shards takes ~16 IDs per shard: a buffer of a few batches
// serves most of them, where a small one (32) refills half the shards on every batch.
const prefetchSize = flag('prefetch', 256)
const prefetchMaxAgeMs = flag('max-age', 5000)
const at = argv.indexOf('--prefix')
/** Databases are `<prefix>_<mode>`: the tests use their own. */
const prefix = at >= 0 ? argv[at + 1]! : 'sf_prisma_example'
if (!/^[a-z_][a-z0-9_]*$/.test(prefix)) throw new Error(`--prefix: not a plain name: ${prefix}`)
const chartAt = argv.indexOf('--chart')
const chartFile = chartAt >= 0 ? argv[chartAt + 1] : undefined
const batchSize = 1000
const logicalShards = 64
/** The application's sharding: every source and the extension get this one object. */
const sharding = defineSharding({ layout: instagram, logicalShards })
/**
 * One in-process source for the process (a second one for the same shards is refused): the
 * in-process mode and the hand-assigned controls draw from it, each into its own database.
 */
const inProcess = new InProcessSource({ sharding, shards: 'all' })
const baseUrl = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

interface WidePost {
  userId: bigint
  title: string
  body: string
  slug: string
  views: number
  published: boolean
  createdAt: Date
}

interface Workload {
  createUser(email: string): Promise<bigint>
  createPost(userId: bigint, title: string): Promise<bigint>
  createComment(postId: bigint, body: string): Promise<bigint>
  createPosts(rows: { userId: bigint; title: string }[]): Promise<unknown>
  createComments(rows: { postId: bigint; body: string }[]): Promise<unknown>
  createWidePosts(rows: WidePost[]): Promise<unknown>
  close(): Promise<void>
}

type Samples = { throughput: number[]; latency: number[] }

interface Mode {
  name: string
  database: string
  workload: Workload
  url: string
  users: bigint[]
  posts: bigint[]
  single: Samples
  batched: Samples
  wide: Samples
}

const tables = (id: string) => [
  `CREATE TABLE users (id ${id}, email TEXT NOT NULL UNIQUE)`,
  `CREATE TABLE posts (id ${id}, user_id BIGINT NOT NULL REFERENCES users (id), title TEXT NOT NULL)`,
  `CREATE TABLE comments (id ${id}, post_id BIGINT NOT NULL REFERENCES posts (id), body TEXT NOT NULL)`,
  `CREATE TABLE wide_posts (id ${id}, user_id BIGINT NOT NULL REFERENCES users (id), title TEXT NOT NULL, body TEXT NOT NULL, slug TEXT NOT NULL, views INT NOT NULL, published BOOLEAN NOT NULL, created_at TIMESTAMP(3) NOT NULL)`,
]

async function freshDatabase(name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: baseUrl })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${name}`)
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(baseUrl)
  url.pathname = `/${name}`
  const db = new pg.Client({ connectionString: url.toString() })
  await db.connect()
  for (const sql of tables('BIGINT PRIMARY KEY')) await db.query(sql)
  for (const sql of tables('BIGSERIAL PRIMARY KEY')) {
    await db.query(sql.replace(/\b(users|posts|comments|wide_posts)\b/g, 'auto_$1'))
  }
  await db.end()
  return url.toString()
}

function adapter(url: string) {
  return new PrismaPg({ connectionString: url, max: 4 })
}

function autoWorkload(url: string): Workload {
  const prisma = new PrismaClient({ adapter: adapter(url) })
  return {
    createUser: async (email) => (await prisma.autoUser.create({ data: { email } })).id,
    createPost: async (userId, title) =>
      (await prisma.autoPost.create({ data: { userId, title } })).id,
    createComment: async (postId, body) =>
      (await prisma.autoComment.create({ data: { postId, body } })).id,
    createPosts: (data) => prisma.autoPost.createMany({ data }),
    createComments: (data) => prisma.autoComment.createMany({ data }),
    createWidePosts: (data) => prisma.autoWidePost.createMany({ data }),
    close: () => prisma.$disconnect(),
  }
}

function shardedWorkload(url: string, source: IdSource, close: () => Promise<void>): Workload {
  const prisma = new PrismaClient({ adapter: adapter(url) }).$extends(shardedIds({ source }))
  return {
    createUser: async (email) => (await prisma.user.create({ data: { email } })).id,
    createPost: async (userId, title) => (await prisma.post.create({ data: { userId, title } })).id,
    createComment: async (postId, body) =>
      (await prisma.comment.create({ data: { postId, body } })).id,
    createPosts: (data) => prisma.post.createMany({ data }),
    createComments: (data) => prisma.comment.createMany({ data }),
    createWidePosts: (data) => prisma.widePost.createMany({ data }),
    close: async () => {
      await prisma.$disconnect()
      await close()
    },
  }
}

/**
 * IDs set by hand on a plain client; with `asText`, `createMany` gets them as decimal strings
 * (Prisma checks those as 64-bit integers; its generated types say `bigint | number`, so the rows
 * keep that type and get their strings at run time).
 */
function appAssignedWorkload(url: string, asText: boolean): Workload {
  const prisma = new PrismaClient({ adapter: adapter(url) })
  const source = inProcess
  const postId = (userId: bigint) => source.nextId(sharding.shardOfId(userId))
  const commentId = (postId: bigint) => source.nextId(sharding.shardOfId(postId))
  const text = <T extends { id: bigint }>(rows: T[]): T[] => {
    if (asText) for (const row of rows) Object.assign(row, { id: row.id.toString() })
    return rows
  }
  return {
    createUser: async (email) =>
      (
        await prisma.user.create({
          data: { id: source.nextId(sharding.shardForKey(email)), email },
        })
      ).id,
    createPost: async (userId, title) =>
      (await prisma.post.create({ data: { id: postId(userId), userId, title } })).id,
    createComment: async (postId, body) =>
      (await prisma.comment.create({ data: { id: commentId(postId), postId, body } })).id,
    createPosts: (data) =>
      prisma.post.createMany({
        data: text(data.map((row) => ({ ...row, id: postId(row.userId) }))),
      }),
    createComments: (data) =>
      prisma.comment.createMany({
        data: text(data.map((row) => ({ ...row, id: commentId(row.postId) }))),
      }),
    createWidePosts: (data) =>
      prisma.widePost.createMany({
        data: text(data.map((row) => ({ ...row, id: postId(row.userId) }))),
      }),
    close: () => prisma.$disconnect(),
  }
}

async function databaseSource(url: string, prefetch: boolean) {
  const installer = new pg.Client({ connectionString: url })
  await installer.connect()
  await installPostgres(installer, { sharding, shards: 'all' })
  await installer.end()
  // A URL: the source opens its own pool (never Prisma's connections) and close() ends it.
  const source = new PostgresSource({
    sharding,
    databases: url,
    ...(prefetch && { prefetch: { size: prefetchSize, maxAgeMs: prefetchMaxAgeMs } }),
  })
  return { source, close: async () => source.close() }
}

async function setup(): Promise<Mode[]> {
  const specs: [string, string][] = [
    ['autoincrement', `${prefix}_auto`],
    ['in-process', `${prefix}_inproc`],
    ['next_id() + prefetch', `${prefix}_prefetch`],
    ['next_id()', `${prefix}_nextid`],
    ['app-assigned, no extension', `${prefix}_manual`],
    ['app-assigned as strings, no extension', `${prefix}_text`],
  ]
  const modes: Mode[] = []
  for (const [name, database] of specs) {
    const url = await freshDatabase(database)
    let workload: Workload
    if (name === 'autoincrement') workload = autoWorkload(url)
    else if (name === 'app-assigned, no extension') workload = appAssignedWorkload(url, false)
    else if (name === 'app-assigned as strings, no extension') {
      workload = appAssignedWorkload(url, true)
    } else if (name === 'in-process') {
      workload = shardedWorkload(url, inProcess, async () => {})
    } else {
      const { source, close } = await databaseSource(url, name === 'next_id() + prefetch')
      workload = shardedWorkload(url, source, close)
    }
    const ids: bigint[] = []
    for (let i = 0; i < users; i++) ids.push(await workload.createUser(`user${i}@example.com`))
    modes.push({
      name,
      database,
      workload,
      url,
      users: ids,
      posts: [],
      single: { throughput: [], latency: [] },
      batched: { throughput: [], latency: [] },
      wide: { throughput: [], latency: [] },
    })
  }
  return modes
}

async function single(mode: Mode, round: number) {
  const { workload } = mode
  const started = performance.now()
  for (let i = 0; i < singles; i++) {
    let t = performance.now()
    const post = await workload.createPost(mode.users[i % mode.users.length]!, `r${round} p${i}`)
    mode.single.latency.push(performance.now() - t)
    mode.posts.push(post)
    t = performance.now()
    await workload.createComment(post, `r${round} c${i}`)
    mode.single.latency.push(performance.now() - t)
  }
  mode.single.throughput.push((2 * singles) / ((performance.now() - started) / 1000))
}

async function batched(mode: Mode, round: number) {
  const { workload } = mode
  const posts = Array.from({ length: batchSize }, (_, i) => ({
    userId: mode.users[i % mode.users.length]!,
    title: `r${round} p${i}`,
  }))
  const comments = Array.from({ length: batchSize }, (_, i) => ({
    postId: mode.posts[(round * batchSize + i * 7) % mode.posts.length]!,
    body: `r${round} c${i}`,
  }))
  let elapsed = 0
  for (const run of [() => workload.createPosts(posts), () => workload.createComments(comments)]) {
    const t = performance.now()
    await run()
    const ms = performance.now() - t
    mode.batched.latency.push(ms)
    elapsed += ms
  }
  mode.batched.throughput.push((2 * batchSize) / (elapsed / 1000))
}

async function wide(mode: Mode, round: number) {
  const createdAt = new Date()
  const rows = Array.from({ length: batchSize }, (_, i) => ({
    userId: mode.users[i % mode.users.length]!,
    title: `r${round} w${i}`,
    body: `Body of wide post ${i} of round ${round}, a sentence or two of text.`,
    slug: `r${round}-w${i}`,
    views: i,
    published: i % 2 === 0,
    createdAt,
  }))
  const t = performance.now()
  await mode.workload.createWidePosts(rows)
  const ms = performance.now() - t
  mode.wide.latency.push(ms)
  mode.wide.throughput.push(batchSize / (ms / 1000))
}

/** The median over rounds of `mode / baseline`, paired round by round, and its quartiles. */
function pairedRatio(mode: number[], baseline: number[]) {
  const ratios = mode.map((value, i) => value / baseline[i]!)
  return {
    ratio: round2(median(ratios)),
    q1: round2(quantile(ratios, 0.25)),
    q3: round2(quantile(ratios, 0.75)),
  }
}

/** Throughput, its paired ratio to the baseline and latency percentiles of one kind of write. */
function summary(samples: Samples, baseline: Samples) {
  return {
    perSecond: Math.round(median(samples.throughput)),
    ...pairedRatio(samples.throughput, baseline.throughput),
    p50Ms: round2(quantile(samples.latency, 0.5)),
    p99Ms: round2(quantile(samples.latency, 0.99)),
  }
}

const median = (values: number[]) => quantile(values, 0.5)
function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
}

async function indexSizes(mode: Mode) {
  const tablePrefix = mode.name === 'autoincrement' ? 'auto_' : ''
  const db = new pg.Client({ connectionString: mode.url })
  await db.connect()
  const sizes: Record<string, { rows: number; indexBytes: number; bytesPerRow: number }> = {}
  for (const table of ['posts', 'comments']) {
    const { rows } = await db.query(
      `SELECT (SELECT COUNT(*) FROM ${tablePrefix}${table})::int AS rows, pg_relation_size('${tablePrefix}${table}_pkey')::int AS bytes`,
    )
    const { rows: n, bytes } = rows[0] as { rows: number; bytes: number }
    sizes[table] = { rows: n, indexBytes: bytes, bytesPerRow: Math.round((bytes / n) * 10) / 10 }
  }
  await db.end()
  return sizes
}

async function main() {
  const started = { at: new Date().toISOString(), load: loadavg().map(round2) }
  const modes = await setup()
  for (let round = 0; round < rounds; round++) {
    // Alternate the order so no mode always runs first (or last) in a round.
    const order = modes.map((_, i) => modes[(i + round) % modes.length]!)
    for (const mode of order) await single(mode, round)
    for (const mode of [...order].reverse()) await batched(mode, round)
    for (const mode of order) await wide(mode, round)
  }
  const finished = { at: new Date().toISOString(), load: loadavg().map(round2) }
  const baseline = modes[0]!
  const report = []
  for (const mode of modes) {
    report.push({
      mode: mode.name,
      single: summary(mode.single, baseline.single),
      createMany: summary(mode.batched, baseline.batched),
      createManyWide: summary(mode.wide, baseline.wide),
      index: await indexSizes(mode),
    })
  }
  if (chartFile) writeChart(chartFile, modes, started.load[0]!, finished.load[0]!)
  await Promise.all(modes.map((mode) => mode.workload.close()))
  inProcess.close()
  const settings = {
    rounds,
    singles,
    batchSize,
    users,
    logicalShards,
    prefetch: { size: prefetchSize, maxAgeMs: prefetchMaxAgeMs },
    // load averages (1, 5, 15 min) when the rounds started and ended
    started,
    finished,
  }
  if (json) {
    console.log(stringifyIds({ settings, results: report }, 2))
    return
  }
  console.log(
    `Prisma 7 + adapter-pg, ${rounds} rounds, medians; per round and mode: ${singles} posts + ${singles} comments one create at a time, createMany(${batchSize}) posts and createMany(${batchSize}) comments, createMany(${batchSize}) wide posts; ${users} users on ${logicalShards} logical shards; prefetch ${prefetchSize} IDs per shard, kept ${prefetchMaxAgeMs} ms. Load average ${started.load.join(' ')} at the start, ${finished.load.join(' ')} at the end. Ratios: median (q1..q3) of mode / autoincrement per round.\n`,
  )
  const ratio = (r: { ratio: number; q1: number; q3: number }) => `${r.ratio} (${r.q1}..${r.q3})`
  console.table(
    report.map((r) => ({
      mode: r.mode,
      'single ops/s': r.single.perSecond,
      'single ratio': ratio(r.single),
      'p50/p99 ms': `${r.single.p50Ms} / ${r.single.p99Ms}`,
      'createMany rows/s': r.createMany.perSecond,
      'batch ratio': ratio(r.createMany),
      'batch p50/p99 ms': `${r.createMany.p50Ms} / ${r.createMany.p99Ms}`,
      'wide rows/s': r.createManyWide.perSecond,
      'wide ratio': ratio(r.createManyWide),
    })),
  )
  console.table(
    report.map((r) => ({
      mode: r.mode,
      'posts pkey bytes/row': r.index.posts?.bytesPerRow,
      'comments pkey bytes/row': r.index.comments?.bytesPerRow,
      'posts pkey MiB': round2((r.index.posts?.indexBytes ?? 0) / 2 ** 20),
    })),
  )
}

/** The results JSON bench-charts draws: every round's throughput, per kind of write and mode. */
function writeChart(file: string, modes: Mode[], loadBefore: number, loadAfter: number) {
  const kinds: [string, (mode: Mode) => Samples][] = [
    [`Single creates (post, then comment)`, (mode) => mode.single],
    [`createMany of ${batchSize} posts + ${batchSize} comments`, (mode) => mode.batched],
    [`createMany of ${batchSize} wide posts`, (mode) => mode.wide],
  ]
  const chart = {
    title: 'Prisma on PostgreSQL: sharded IDs against BigInt autoincrement',
    unit: 'rows/s',
    note: [
      `${new Date().toISOString().slice(0, 10)}, ${rounds} rounds, ${users} users on ${logicalShards} logical shards, prefetch ${prefetchSize} IDs per shard, Node ${process.versions.node}`,
      `Load average ${Math.min(loadBefore, loadAfter).toFixed(1)}-${Math.max(loadBefore, loadAfter).toFixed(1)} on ${availableParallelism()} cores at the start and end of the run`,
    ],
    baseline: 'autoincrement',
    rows: kinds.flatMap(([group, samples]) =>
      modes.map((mode) => ({
        label: mode.name,
        group,
        values: samples(mode).throughput.map((value) => Number(value.toPrecision(4))),
      })),
    ),
  }
  writeFileSync(file, JSON.stringify(chart))
}

function round2(value: number): number {
  return Math.round(value * 100) / 100
}

await main()
