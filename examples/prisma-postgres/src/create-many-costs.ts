/**
 * Where the time of a Prisma `createMany` of 1000 rows goes, with and without explicit IDs:
 * the SQL Prisma sends (statement count, parameter count), then timings of the same rows through
 * Prisma and through raw SQL, in alternating rounds (medians, ratio to `autoincrement`).
 *
 *   node src/create-many-costs.ts [--rounds 21] [--json]
 *
 * Uses its own database `sf_prisma_example_costs` (dropped and created).
 */
import { PrismaPg } from '@prisma/adapter-pg'
import { InProcessSource, instagram, integerShard, stringifyIds } from '@shardflake/core'
import { shardedIds } from '@shardflake/prisma'
import pg from 'pg'
import { PrismaClient } from './generated/prisma/client.ts'
import { models } from './generated/shardflake/index.ts'

const argv = process.argv.slice(2)
const at = argv.indexOf('--rounds')
const rounds = at >= 0 ? Number(argv[at + 1]) : 21
const json = argv.includes('--json')
const baseUrl = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const logicalShards = 64
const users = 100

const admin = new pg.Client({ connectionString: baseUrl })
await admin.connect()
await admin.query('DROP DATABASE IF EXISTS sf_prisma_example_costs WITH (FORCE)')
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
const captured: { sql: string; params: number }[] = []
let capturing = false
const query = pg.Client.prototype.query
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  if (capturing) {
    const [config, values] = args as [string | { text: string; values?: unknown[] }, unknown[]?]
    const sql = typeof config === 'string' ? config : config.text
    const params = (typeof config === 'string' ? values : (config.values ?? values)) ?? []
    captured.push({ sql, params: params.length })
  }
  return (query as (...a: unknown[]) => unknown).apply(this, args)
} as typeof query

const adapter = (options?: ConstructorParameters<typeof PrismaPg>[1]) =>
  new PrismaPg({ connectionString: url.toString(), max: 2 }, options)
const plain = new PrismaClient({ adapter: adapter() })
// Prepared statements: one name per statement shape, so pg parses a shape once per connection.
const prepared = new PrismaClient({
  adapter: adapter({
    statementNameGenerator: (q: { sql: string }) =>
      `sf_${Buffer.from(q.sql).toString('base64url').slice(-40)}_${q.sql.length}`,
  } as never),
})
const noop = plain.$extends({
  query: { $allModels: { $allOperations: ({ args, query }) => query(args) } },
})
const source = new InProcessSource({ layout: instagram, shards: 'all', logicalShards })
const extended = plain.$extends(shardedIds({ source, models }))

let batch = 0
const rows = () => {
  batch++
  return Array.from({ length: 1000 }, (_, i) => ({
    userId: BigInt((i % users) + 1),
    title: `b${batch} t${i}`,
  }))
}
const withIds = () =>
  rows().map((row) => ({ id: source.nextId(integerShard(row.userId, logicalShards)), ...row }))
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

const cases: Record<string, () => Promise<unknown>> = {
  'autoincrement (baseline)': () => plain.autoPost.createMany({ data: rows() }),
  'explicit IDs, no extension': () => plain.post.createMany({ data: withIds() }),
  'explicit IDs, no-op query extension': () => noop.post.createMany({ data: withIds() }),
  'shardedIds, in-process': () => extended.post.createMany({ data: rows() }),
  'explicit IDs in the autoincrement table': () => plain.autoPost.createMany({ data: withIds() }),
  'wide rows (7 columns), autoincrement': () => plain.autoWidePost.createMany({ data: wide() }),
  'wide rows (7 columns), shardedIds in-process': () =>
    extended.widePost.createMany({ data: wide() }),
  'shardedIds.assign alone (no query)': () => extended.$shardedIds.assign('Post', rows()),
  // Prisma turns each distinct value into one placeholder: 101 instead of 1100 here.
  'autoincrement, one title for all rows': () =>
    plain.autoPost.createMany({ data: rows().map((r) => ({ ...r, title: 'same' })) }),
  'autoincrement, prepared statements': () => prepared.autoPost.createMany({ data: rows() }),
  'explicit IDs, prepared statements': () => prepared.post.createMany({ data: withIds() }),
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
}

// Single creates: 100 in a row, so the per-call cost of a query extension shows.
const singles =
  (create: (row: { userId: bigint; title: string }) => Promise<unknown>) => async () => {
    for (const row of rows().slice(0, 100)) await create(row)
  }
Object.assign(cases, {
  '100 single creates, autoincrement': singles((data) => plain.autoPost.create({ data })),
  '100 single creates, explicit IDs, no extension': singles((data) =>
    plain.post.create({
      data: { id: source.nextId(integerShard(data.userId, logicalShards)), ...data },
    }),
  ),
  '100 single creates, explicit IDs, no-op query extension': singles((data) =>
    noop.post.create({
      data: { id: source.nextId(integerShard(data.userId, logicalShards)), ...data },
    }),
  ),
  '100 single creates, shardedIds in-process': singles((data) => extended.post.create({ data })),
})

const shapes: Record<string, { statements: number; params: number[]; sqlChars: number[] }> = {}
for (const name of [
  'autoincrement (baseline)',
  'explicit IDs, no extension',
  'shardedIds, in-process',
]) {
  captured.length = 0
  capturing = true
  await cases[name]!()
  capturing = false
  shapes[name] = {
    statements: captured.length,
    params: captured.map((c) => c.params),
    sqlChars: captured.map((c) => c.sql.length),
  }
}

const times: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]))
const names = Object.keys(cases)
for (let round = 0; round < rounds + 2; round++) {
  for (let k = 0; k < names.length; k++) {
    const name = names[(k + round) % names.length]!
    const started = performance.now()
    await cases[name]!()
    if (round >= 2) times[name]!.push(performance.now() - started)
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const report = names.map((name) => {
  const against = name.startsWith('wide rows')
    ? 'wide rows (7 columns), autoincrement'
    : name.startsWith('100 single')
      ? '100 single creates, autoincrement'
      : 'autoincrement (baseline)'
  const baseline = times[against]!
  return {
    case: name,
    medianMs: Math.round(median(times[name]!) * 100) / 100,
    // paired per round: baseline time / case time (> 1 is faster than its baseline)
    ratio: Math.round(median(times[name]!.map((t, i) => baseline[i]! / t)) * 100) / 100,
    against,
  }
})
await plain.$disconnect()
await prepared.$disconnect()
await db.end()
if (json) console.log(stringifyIds({ rounds, shapes, results: report }, 2))
else {
  console.log(`createMany of 1000 posts (${users} users), ${rounds} alternating rounds, medians`)
  console.table(shapes)
  console.table(report)
}
