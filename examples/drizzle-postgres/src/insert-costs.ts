/**
 * One INSERT of N posts taken apart, sharded keys (in-process) against the identity column, to
 * see what bounds the ratio the benchmark measures:
 * - `assign`:  `ids.assign(posts, rows)` alone (placing N rows, one `nextIds` per shard);
 * - `build`:   Drizzle turning `.values(rows)` into SQL and parameters (`toSQL()`), no database;
 * - `raw`:     that SQL and those parameters sent with pg directly (driver, wire and server);
 * - `drizzle`: the whole INSERT through Drizzle (what the benchmark times), identity with
 *              `.returning({ id })`, sharded after `assign`;
 * - `next_ids`: what a database source adds instead of the in-process one: one
 *              `PostgresSource.nextIds(shard, N)` round trip (`next_ids(N)` in the database).
 * Every part alternates between the two key schemes, round after round; medians with min..max.
 *
 *   node src/insert-costs.ts [--rows=1000] [--rounds=15] [--authors=1] [--json]
 */
import { availableParallelism, loadavg } from 'node:os'
import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { shardedIds } from '@shardflake/drizzle'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import { drizzle } from 'drizzle-orm/node-postgres'
import { npmVersion } from 'drizzle-orm/version'
import pg from 'pg'
import { autoAuthors, autoPosts, schemaSql, shardedTables } from './schema.ts'

const option = (name: string, fallback: string) =>
  process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
const size = Number(option('rows', '1000'))
const rounds = Number(option('rounds', '15'))
const authorsPerInsert = Number(option('authors', '1'))
const repeats = Math.max(3, Math.round(size === 1 ? 200 : 3000 / size))
const loads = [loadavg()[0]!]

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const base = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
const name = `sf_drizzle_costs_${process.pid}`
const admin = new pg.Client({ connectionString: base.toString() })
await admin.connect()
await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
await admin.query(`CREATE DATABASE ${name}`)
base.pathname = `/${name}`
const pool = new pg.Pool({ connectionString: base.toString(), max: 2 })
for (const sql of schemaSql) await pool.query(sql)
const db = drizzle({ client: pool })
await installPostgres(pool, { sharding, shards: 'all' })
// Only timed: the IDs it makes are dropped, never stored next to the in-process source's (one
// source per logical shard is the rule for IDs that are kept).
const database = new PostgresSource({ sharding, databases: pool })
const source = new InProcessSource({ sharding, shards: 'all' })
const tables = shardedTables()
const ids = shardedIds(db, { source, schema: tables })

const emails = Array.from({ length: 16 }, (_, i) => `author${i}@example.com`)
const autoIds = (
  await db
    .insert(autoAuthors)
    .values(emails.map((email) => ({ email })))
    .returning({ id: autoAuthors.id })
).map((row) => row.id)
const authorRows = await ids.assign(
  tables.authors,
  emails.map((email) => ({ email })),
)
await db.insert(tables.authors).values(authorRows)
const shardedAuthorIds = authorRows.map((row) => row.id!)

let seed = 0
const rowsOf = (authorIds: bigint[]) => {
  seed++
  return Array.from({ length: size }, (_, i) => ({
    authorId: authorIds[(seed + (i % authorsPerInsert)) % authorIds.length]!,
    title: `post ${i}`,
  }))
}
const time = async (work: () => unknown): Promise<number> => {
  const started = performance.now()
  await work()
  return performance.now() - started
}

type Part = 'assign' | 'build' | 'raw' | 'drizzle' | 'next_ids'
const parts: Part[] = ['assign', 'build', 'raw', 'drizzle', 'next_ids']
const samples = new Map<string, number[]>()
const record = (key: string, ms: number) => samples.set(key, [...(samples.get(key) ?? []), ms])

async function measure(part: Part, scheme: 'identity' | 'sharded'): Promise<number> {
  let total = 0
  for (let r = 0; r < repeats; r++) {
    if (scheme === 'identity') {
      const rows = rowsOf(autoIds)
      const query = db.insert(autoPosts).values(rows).returning({ id: autoPosts.id })
      if (part === 'assign') continue
      if (part === 'build') total += await time(() => query.toSQL())
      else if (part === 'raw') {
        const { sql, params } = query.toSQL()
        total += await time(() => pool.query(sql, params))
      } else total += await time(() => query)
    } else {
      const rows = rowsOf(shardedAuthorIds)
      if (part === 'assign') {
        total += await time(() => ids.assign(tables.posts, rows))
        continue
      }
      if (part === 'next_ids') {
        total += await time(() => database.nextIds(r % 64, size))
        continue
      }
      if (part === 'drizzle') {
        total += await time(async () => {
          await db.insert(tables.posts).values(await ids.assign(tables.posts, rows))
        })
        continue
      }
      const query = db.insert(tables.posts).values(await ids.assign(tables.posts, rows))
      if (part === 'build') total += await time(() => query.toSQL())
      else {
        const { sql, params } = query.toSQL()
        total += await time(() => pool.query(sql, params))
      }
    }
  }
  return total / repeats
}

for (let round = 0; round <= rounds; round++) {
  for (const part of parts) {
    const order =
      (round + parts.indexOf(part)) % 2 === 0 ? ['identity', 'sharded'] : ['sharded', 'identity']
    for (const scheme of order as ('identity' | 'sharded')[]) {
      // Nothing to assign, no IDs to fetch with the identity column.
      if ((part === 'assign' || part === 'next_ids') && scheme === 'identity') continue
      const ms = await measure(part, scheme)
      if (round > 0) record(`${part} ${scheme}`, ms)
    }
  }
}
loads.push(loadavg()[0]!)

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const summary = parts.map((part) => {
  const identity = samples.get(`${part} identity`) ?? []
  const sharded = samples.get(`${part} sharded`)!
  const ratios = identity.length ? sharded.map((ms, i) => ms / identity[i]!) : []
  return {
    part,
    identityMs: identity.length ? Number(median(identity).toFixed(3)) : null,
    shardedMs: Number(median(sharded).toFixed(3)),
    shardedMsMin: Number(Math.min(...sharded).toFixed(3)),
    shardedMsMax: Number(Math.max(...sharded).toFixed(3)),
    timeRatio: ratios.length ? Number(median(ratios).toFixed(3)) : null,
    timeRatioMin: ratios.length ? Number(Math.min(...ratios).toFixed(3)) : null,
    timeRatioMax: ratios.length ? Number(Math.max(...ratios).toFixed(3)) : null,
  }
})

if (process.argv.includes('--json')) {
  console.log(
    JSON.stringify(
      { drizzle: npmVersion, size, rounds, repeats, authorsPerInsert, loads, summary },
      null,
      2,
    ),
  )
} else {
  console.log(
    `Drizzle ${npmVersion}: one INSERT of ${size} rows taken apart, ${rounds} rounds of ${repeats}, ms medians (sharded/identity time, min..max); load ${loads.map((l) => l.toFixed(1)).join('-')} on ${availableParallelism()} cores\n`,
  )
  for (const s of summary) {
    console.log(
      `${s.part.padEnd(8)} identity ${s.identityMs === null ? '-'.padStart(8) : s.identityMs.toFixed(2).padStart(8)}  sharded ${s.shardedMs.toFixed(2).padStart(8)}  ${s.timeRatio === null ? '' : `${s.timeRatio.toFixed(2)} (${s.timeRatioMin!.toFixed(2)}..${s.timeRatioMax!.toFixed(2)})`}`,
    )
  }
}

ids.close()
await database.close()
await source.close()
await pool.end()
await admin.query(`DROP DATABASE IF EXISTS ${name}`)
await admin.end()
