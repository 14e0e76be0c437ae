/**
 * What a 64-bit key carried in a 1000-row INSERT costs PostgreSQL, with node-postgres alone (no
 * Kysely, no plugin): the same rows into tables of the same shape, in the same run, in a shuffled
 * order per insert, medians of several rounds.
 *
 *   node src/key-column-cost.ts [--rounds=7] [--inserts=8] [--rows=1000] [--columns=0]
 *     [--database=sf_key_column_cost]
 *   (PG_URL elsewhere than postgres://postgres@127.0.0.1:5432/test; run it on the database's
 *   machine: the server's CPU time is read from /proc/<pid>/schedstat)
 *
 * Variants, each its own table `(id, author_id, title[, c0 .. cN-1 TEXT])` with a foreign key to
 * its authors:
 * - autoincrement: `BIGSERIAL` key, not in the INSERT (the baseline);
 * - key, params:   the key in the INSERT as a parameter (what the plugin does), IDs from an
 *                  `InProcessSource` made before the clock starts;
 * - key, literals: the same IDs written into the SQL as integer literals (no parameter);
 * - other column:  a `BIGSERIAL` key, and one more `BIGINT` column given as a parameter: a third
 *                  value per row that is not the key.
 * `--columns=N` adds N text columns to every table (wider rows).
 *
 * Per insert: wall time, this process's CPU time (building the SQL, node-postgres serializing
 * the parameters, reading the returned keys) and the server process's CPU time (parse, bind,
 * insert, indexes, commit), medians over rounds of the per-round means; ratio = autoincrement
 * time / variant time per round, median (min..max).
 */
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import pg from 'pg'
import { shuffled } from '../../../bench-charts/src/shuffle.ts'

const option = (name: string, fallback: string) =>
  process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
const rounds = Number(option('rounds', '7'))
const insertsPerRound = Number(option('inserts', '8'))
const size = Number(option('rows', '1000'))
const columns = Number(option('columns', '0'))
const database = `${option('database', 'sf_key_column_cost')}_${process.pid}`
const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const source = new InProcessSource({ sharding, shards: 'all' })
const shards = 16

const variants = ['autoincrement', 'key, params', 'key, literals', 'other column'] as const
type Variant = (typeof variants)[number]
const tableOf = (variant: Variant) => `posts_${variants.indexOf(variant)}`
const serialKey = (variant: Variant) => variant === 'autoincrement' || variant === 'other column'

const base = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
const url = new URL(base)
url.pathname = `/${database}`
const admin = new pg.Client({ connectionString: base.toString() })
await admin.connect()
await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
await admin.query(`CREATE DATABASE ${database}`)
const client = new pg.Client({ connectionString: url.toString() })
await client.connect()

const extra = Array.from({ length: columns }, (_, k) => `c${k}`)
/** Each variant's authors' IDs, one author per shard. */
const authors = new Map<Variant, string[]>()
for (const variant of variants) {
  const table = tableOf(variant)
  const key = serialKey(variant) ? 'BIGSERIAL' : 'BIGINT'
  await client.query(`CREATE TABLE ${table}_authors (id ${key} PRIMARY KEY, email TEXT NOT NULL)`)
  await client.query(
    `CREATE TABLE ${table} (id ${key} PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES ${table}_authors (id), title TEXT NOT NULL${variant === 'other column' ? ', n BIGINT NOT NULL' : ''}${extra.map((c) => `, ${c} TEXT NOT NULL`).join('')})`,
  )
  const ids: string[] = []
  for (let shard = 0; shard < shards; shard++) {
    const { rows } = serialKey(variant)
      ? await client.query<{ id: string }>(
          `INSERT INTO ${table}_authors (email) VALUES ($1) RETURNING id`,
          [`author${shard}@example.com`],
        )
      : await client.query<{ id: string }>(
          `INSERT INTO ${table}_authors (id, email) VALUES ($1, $2) RETURNING id`,
          [source.nextId(shard).toString(), `author${shard}@example.com`],
        )
    ids.push(rows[0]!.id)
  }
  authors.set(variant, ids)
}

const { rows: backend } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
/** The server process's CPU time so far, in ms. */
const serverCpuMs = () =>
  Number(readFileSync(`/proc/${backend[0]!.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6

/** One INSERT of `size` rows of one author: its SQL text and parameters. */
function statement(variant: Variant, seed: number): [string, unknown[]] {
  const shard = seed % shards
  const author = authors.get(variant)![shard]!
  const ids = serialKey(variant) ? [] : source.nextIds(shard, size)
  const others = variant === 'other column' ? source.nextIds(shard, size) : []
  const params: unknown[] = []
  const tuples: string[] = []
  const param = (value: unknown) => {
    params.push(value)
    return `$${params.length}`
  }
  for (let i = 0; i < size; i++) {
    const values: string[] = []
    if (variant === 'key, params') values.push(param(ids[i]!.toString()))
    if (variant === 'key, literals') values.push(ids[i]!.toString())
    values.push(param(author), param(`post ${seed}.${i}`))
    if (variant === 'other column') values.push(param(others[i]!.toString()))
    for (const c of extra) values.push(param(`${c} of post ${seed}.${i}`))
    tuples.push(`(${values.join(', ')})`)
  }
  const names = [
    ...(serialKey(variant) ? [] : ['id']),
    'author_id',
    'title',
    ...(variant === 'other column' ? ['n'] : []),
    ...extra,
  ]
  return [
    `INSERT INTO ${tableOf(variant)} (${names.join(', ')}) VALUES ${tuples.join(', ')} RETURNING id`,
    params,
  ]
}

type Measures = { wall: number[]; client: number[]; server: number[] }
const measured = new Map<Variant, Measures>(
  variants.map((variant) => [variant, { wall: [], client: [], server: [] }]),
)
const loadAtStart = loadavg()[0]!
let seed = 0
for (let round = 0; round <= rounds; round++) {
  const sums = new Map(variants.map((variant) => [variant, { wall: 0, client: 0, server: 0 }]))
  for (let n = 0; n < insertsPerRound; n++) {
    seed++
    for (const variant of shuffled(variants, seed)) {
      const server = serverCpuMs()
      const cpu = process.cpuUsage()
      const started = performance.now()
      const [text, params] = statement(variant, seed)
      const { rowCount } = await client.query(text, params)
      const wall = performance.now() - started
      const used = process.cpuUsage(cpu)
      if (rowCount !== size) throw new Error(`${variant}: ${rowCount} rows, not ${size}`)
      const sum = sums.get(variant)!
      sum.wall += wall
      sum.client += (used.user + used.system) / 1000
      sum.server += serverCpuMs() - server
    }
  }
  if (round === 0) continue // warm-up
  for (const variant of variants) {
    const sum = sums.get(variant)!
    const m = measured.get(variant)!
    m.wall.push(sum.wall / insertsPerRound)
    m.client.push(sum.client / insertsPerRound)
    m.server.push(sum.server / insertsPerRound)
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
console.log(
  `INSERTs of ${size} rows (${2 + columns} columns besides the key), node-postgres alone, ${rounds} rounds of ${insertsPerRound} per variant; load average ${loadAtStart.toFixed(1)}-${loadavg()[0]!.toFixed(1)}`,
)
console.log(
  `${'variant'.padEnd(14)} ${'ratio'.padStart(5)} ${'(min..max)'.padEnd(12)} ${'wall ms'.padStart(8)} ${'client cpu'.padStart(10)} ${'server cpu'.padStart(10)}`,
)
const baseline = measured.get('autoincrement')!.wall
for (const variant of variants) {
  const m = measured.get(variant)!
  const ratios = m.wall.map((wall, i) => baseline[i]! / wall)
  console.log(
    `${variant.padEnd(14)} ${median(ratios).toFixed(2).padStart(5)} ${`(${Math.min(...ratios).toFixed(2)}..${Math.max(...ratios).toFixed(2)})`.padEnd(12)} ${median(m.wall).toFixed(2).padStart(8)} ${median(m.client).toFixed(2).padStart(10)} ${median(m.server).toFixed(2).padStart(10)}`,
  )
}
source.close()
await client.end()
await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
await admin.end()
