/**
 * Where the time of a Prisma `createMany` of 1000 rows goes, with and without explicit IDs: the
 * SQL Prisma sends (statements, parameters, how the ID travels), then the same rows through
 * Prisma and through raw SQL in alternating rounds (medians, ratios paired per round against
 * `autoincrement`), and with `--phases`, Prisma's own phases per call.
 *
 *   node src/create-many-costs.ts [--rounds 21] [--phases] [--json]
 *
 * `--phases` times the spans Prisma opens for tracing (`serialize`: arguments to its JSON
 * protocol; `compile`: the query compiler (WebAssembly) turning that into a query plan;
 * `db_query`: the adapter and the database) through the global hook `@prisma/instrumentation`
 * uses. It is a diagnostic only: an internal contract of Prisma 7, not something to ship.
 *
 * Uses its own database `sf_prisma_example_costs` (dropped and created). Its users have IDs
 * 1-100 in both tables, so every sharded post decodes to shard 0: it measures what Prisma pays
 * per value, not placement (`src/bench.ts` spreads users over the shards).
 */
import { PrismaPg } from '@prisma/adapter-pg'
import { defineSharding, InProcessSource, instagram, stringifyIds } from '@shardflake/core'
import { shardedIds } from '@shardflake/prisma'
import pg from 'pg'
import { PrismaClient } from './generated/prisma/client.ts'
import { models } from './generated/shardflake/index.ts'

const argv = process.argv.slice(2)
const at = argv.indexOf('--rounds')
const rounds = at >= 0 ? Number(argv[at + 1]) : 21
const json = argv.includes('--json')
const phases = argv.includes('--phases')
const baseUrl = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const logicalShards = 64
const users = 100

const admin = new pg.Client({ connectionString: baseUrl })
await admin.connect()
await admin.query('DROP DATABASE IF EXISTS sf_prisma_example_costs')
await admin.query('CREATE DATABASE sf_prisma_example_costs')
await admin.end()
const url = new URL(baseUrl)
url.pathname = '/sf_prisma_example_costs'
const db = new pg.Client({ connectionString: url.toString() })
await db.connect()
for (const [prefix, id] of [
  ['', 'BIGINT PRIMARY KEY'],
  ['auto_', 'BIGSERIAL PRIMARY KEY'],
]) {
  await db.query(`CREATE TABLE ${prefix}users (id ${id}, email TEXT NOT NULL UNIQUE)`)
  await db.query(
    `CREATE TABLE ${prefix}posts (id ${id}, user_id BIGINT NOT NULL REFERENCES ${prefix}users (id), title TEXT NOT NULL)`,
  )
  await db.query(
    `CREATE TABLE ${prefix}wide_posts (id ${id}, user_id BIGINT NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL, slug TEXT NOT NULL, views INT NOT NULL, published BOOLEAN NOT NULL, created_at TIMESTAMP(3) NOT NULL)`,
  )
  await db.query(
    `INSERT INTO ${prefix}users SELECT g, 'u' || g FROM generate_series(1, ${users}) g`,
  )
}
await db.query(`SELECT setval('auto_users_id_seq', ${users})`)

// Every statement a pg client sends, while `capturing` is on.
const captured: { sql: string; params: unknown[] }[] = []
let capturing = false
const query = pg.Client.prototype.query
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  if (capturing) {
    const [config, values] = args as [string | { text: string; values?: unknown[] }, unknown[]?]
    const sql = typeof config === 'string' ? config : config.text
    const params = (typeof config === 'string' ? values : (config.values ?? values)) ?? []
    captured.push({ sql, params })
  }
  return (query as (...a: unknown[]) => unknown).apply(this, args)
} as typeof query

// Prisma's tracing spans, summed per call while `timing` is on (`--phases` only).
const spans: Record<string, number> = {}
let timing = false
if (phases) {
  const helper = {
    isEnabled: () => true,
    getTraceParent: () => '00-10-10-00',
    dispatchEngineSpans: () => {},
    getActiveContext: () => undefined,
    runInChildSpan(options: string | { name: string }, callback: () => unknown) {
      const name = typeof options === 'string' ? options : options.name
      const started = performance.now()
      const done = () => {
        if (timing) spans[name] = (spans[name] ?? 0) + performance.now() - started
      }
      const result = callback()
      if (result instanceof Promise) return result.finally(done)
      done()
      return result
    },
  }
  Object.assign(globalThis, { V7_PRISMA_INSTRUMENTATION: { helper } })
}

const adapter = (options?: ConstructorParameters<typeof PrismaPg>[1]) =>
  new PrismaPg({ connectionString: url.toString(), max: 2 }, options)
const plain = new PrismaClient({ adapter: adapter() })
// Prepared statements: one name per statement shape, so pg parses a shape once per connection.
const prepared = new PrismaClient({
  adapter: adapter({
    statementNameGenerator: (q: { sql: string }) =>
      `sf_${Buffer.from(q.sql).toString('base64url').slice(-40)}_${q.sql.length}`,
  }),
})
const noop = plain.$extends({
  query: { $allModels: { $allOperations: ({ args, query }) => query(args) } },
})
const sharding = defineSharding({ layout: instagram, logicalShards })
const source = new InProcessSource({ sharding, shards: 'all' })
const extended = plain.$extends(shardedIds({ source, models }))
const preparedExtended = prepared.$extends(shardedIds({ source, models }))

let batch = 0
const rows = () => {
  batch++
  return Array.from({ length: 1000 }, (_, i) => ({
    userId: BigInt((i % users) + 1),
    title: `b${batch} t${i}`,
  }))
}
const postId = (userId: bigint) => source.nextId(sharding.shardOfId(userId))
const withIds = () => rows().map((row) => ({ id: postId(row.userId), ...row }))
/**
 * Prisma takes a decimal string for a BigInt field too (and checks it as a 64-bit integer): what
 * the extension sends for `createMany`. The generated types say `bigint | number`, so the rows
 * keep that type and get their strings at run time.
 */
function asText<T extends object, K extends keyof T>(data: T[], field: K): T[] {
  for (const row of data) Object.assign(row, { [field]: String(row[field]) })
  return data
}
const withTextIds = () => asText(withIds(), 'id')
const wide = () =>
  rows().map((row, i) => ({
    ...row,
    body: `body of ${row.title}`,
    slug: `slug-${batch}-${i}`,
    views: i,
    published: i % 2 === 0,
    createdAt: new Date(),
  }))
const unnest = (table: string, data: { id?: bigint; userId: bigint; title: string }[]) =>
  data[0]?.id === undefined
    ? plain.$executeRaw`INSERT INTO auto_posts (user_id, title) SELECT * FROM unnest(${data.map((r) => r.userId)}::bigint[], ${data.map((r) => r.title)}::text[])`
    : table === 'posts'
      ? plain.$executeRaw`INSERT INTO posts (id, user_id, title) SELECT * FROM unnest(${data.map((r) => r.id!)}::bigint[], ${data.map((r) => r.userId)}::bigint[], ${data.map((r) => r.title)}::text[])`
      : Promise.reject(new Error(table))
const values = (n: number, width: number) =>
  Array.from(
    { length: n },
    (_, i) => `(${Array.from({ length: width }, (_, j) => `$${i * width + j + 1}`).join(',')})`,
  ).join(', ')

const BASELINE = 'autoincrement (baseline)'
const cases: Record<string, () => Promise<unknown>> = {
  [BASELINE]: () => plain.autoPost.createMany({ data: rows() }),
  'IDs set by hand (bigint), no extension': () => plain.post.createMany({ data: withIds() }),
  'IDs set by hand as strings, no extension': () => plain.post.createMany({ data: withTextIds() }),
  'IDs set by hand (bigint), no-op query extension': () =>
    noop.post.createMany({ data: withIds() }),
  'shardedIds, in-process': () => extended.post.createMany({ data: rows() }),
  '$shardedIds.assign, then createMany': async () =>
    extended.post.createMany({ data: await extended.$shardedIds.assign('Post', rows()) }),
  'IDs set by hand (bigint) into the autoincrement table': () =>
    plain.autoPost.createMany({ data: withIds() }),
  // Prisma turns each distinct value into one placeholder: 101 instead of 1100 here.
  'autoincrement, one title for all rows': () =>
    plain.autoPost.createMany({ data: rows().map((r) => ({ ...r, title: 'same' })) }),
  // The same values with the (bigint) user IDs as strings: what a query parameter costs Prisma.
  'autoincrement, user IDs as strings': () =>
    plain.autoPost.createMany({ data: asText(rows(), 'userId') }),
  'autoincrement, prepared statements': () => prepared.autoPost.createMany({ data: rows() }),
  'IDs set by hand (bigint), prepared statements': () =>
    prepared.post.createMany({ data: withIds() }),
  'shardedIds, prepared statements': () => preparedExtended.post.createMany({ data: rows() }),
  'raw pg, autoincrement': () =>
    db.query(
      `INSERT INTO auto_posts (user_id, title) VALUES ${values(1000, 2)}`,
      rows().flatMap((r) => [String(r.userId), r.title]),
    ),
  'raw pg, explicit IDs': () =>
    db.query(
      `INSERT INTO posts (id, user_id, title) VALUES ${values(1000, 3)}`,
      withIds().flatMap((r) => [String(r.id), String(r.userId), r.title]),
    ),
  '$executeRaw unnest, autoincrement': () => unnest('auto_posts', rows()),
  '$executeRaw unnest, explicit IDs': () => unnest('posts', withIds()),
  'wide rows (7 columns), autoincrement': () => plain.autoWidePost.createMany({ data: wide() }),
  'wide rows (7 columns), IDs set by hand (bigint)': () =>
    plain.widePost.createMany({ data: wide().map((r) => ({ id: postId(r.userId), ...r })) }),
  'wide rows (7 columns), shardedIds in-process': () =>
    extended.widePost.createMany({ data: wide() }),
  '$shardedIds.assign alone (no query)': () => extended.$shardedIds.assign('Post', rows()),
}

// Single creates: 100 in a row, so the per-call cost of a query extension shows.
const singles =
  (create: (row: { userId: bigint; title: string }) => Promise<unknown>) => async () => {
    for (const row of rows().slice(0, 100)) await create(row)
  }
Object.assign(cases, {
  '100 single creates, autoincrement': singles((data) => plain.autoPost.create({ data })),
  '100 single creates, IDs set by hand, no extension': singles((data) =>
    plain.post.create({ data: { id: postId(data.userId), ...data } }),
  ),
  '100 single creates, IDs set by hand, no-op query extension': singles((data) =>
    noop.post.create({ data: { id: postId(data.userId), ...data } }),
  ),
  '100 single creates, shardedIds in-process': singles((data) => extended.post.create({ data })),
})

const shapes: Record<string, { statements: number; params: number; idParam: string }> = {}
for (const name of [
  BASELINE,
  'IDs set by hand (bigint), no extension',
  'IDs set by hand as strings, no extension',
  'shardedIds, in-process',
]) {
  captured.length = 0
  capturing = true
  await cases[name]!()
  capturing = false
  const first = captured.find((c) => c.sql.startsWith('INSERT'))
  shapes[name] = {
    statements: captured.length,
    params: first?.params.length ?? 0,
    // what the pg driver is handed for the first row's first column (the ID, or user_id)
    idParam: `${typeof first?.params[0]} ${String(first?.params[0])}`,
  }
}

const names = Object.keys(cases)
const times: Record<string, number[]> = Object.fromEntries(names.map((k) => [k, []]))
const cpu: Record<string, number[]> = Object.fromEntries(names.map((k) => [k, []]))
const phaseTimes: Record<string, Record<string, number[]>> = {}
for (let round = 0; round < rounds + 2; round++) {
  for (let k = 0; k < names.length; k++) {
    const name = names[(k + round) % names.length]!
    for (const span of Object.keys(spans)) delete spans[span]
    timing = round >= 2
    const started = performance.now()
    const cpuStarted = process.cpuUsage()
    await cases[name]!()
    const cpuUsed = process.cpuUsage(cpuStarted)
    const elapsed = performance.now() - started
    timing = false
    if (round < 2) continue
    times[name]!.push(elapsed)
    cpu[name]!.push((cpuUsed.user + cpuUsed.system) / 1000)
    if (phases) {
      const phase = phaseTimes[name] ?? {}
      phaseTimes[name] = phase
      // operation: the whole call inside Prisma; other: what the three spans below leave
      const parts = { ...spans, other: spans.operation ?? 0 }
      for (const span of ['serialize', 'compile', 'db_query']) parts.other -= spans[span] ?? 0
      for (const [span, ms] of Object.entries(parts)) {
        const list = phase[span] ?? []
        list.push(ms)
        phase[span] = list
      }
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const round2 = (x: number) => Math.round(x * 100) / 100
const report = names.map((name) => {
  const against = name.startsWith('wide rows')
    ? 'wide rows (7 columns), autoincrement'
    : name.startsWith('100 single')
      ? '100 single creates, autoincrement'
      : BASELINE
  // paired per round: baseline time / case time (> 1 is faster than its baseline)
  const ratios = times[name]!.map((t, i) => times[against]![i]! / t).sort((a, b) => a - b)
  return {
    case: name,
    medianMs: round2(median(times[name]!)),
    ratio: round2(median(ratios)),
    'ratio q1..q3': `${round2(ratios[Math.floor(ratios.length / 4)]!)}..${round2(ratios[Math.floor((3 * ratios.length) / 4)]!)}`,
    'ratio min..max': `${round2(ratios[0]!)}..${round2(ratios[ratios.length - 1]!)}`,
    cpuMs: round2(median(cpu[name]!)),
    cpuRatio: round2(median(cpu[name]!.map((t, i) => cpu[against]![i]! / t))),
    against,
  }
})
const phaseReport = Object.fromEntries(
  Object.entries(phaseTimes)
    .filter(([name]) => !name.startsWith('raw pg') && !name.includes('alone'))
    .map(([name, phase]) => [
      name,
      Object.fromEntries(Object.entries(phase).map(([span, ms]) => [span, round2(median(ms))])),
    ]),
)
await plain.$disconnect()
await prepared.$disconnect()
await db.end()
if (json) {
  console.log(stringifyIds({ rounds, shapes, results: report, phases: phaseReport }, 2))
} else {
  console.log(`createMany of 1000 posts (${users} users), ${rounds} alternating rounds, medians`)
  console.table(shapes)
  console.table(report)
  if (phases) {
    console.log('Prisma phases per call, ms (operation = the whole call inside Prisma)')
    console.table(phaseReport)
  }
}
