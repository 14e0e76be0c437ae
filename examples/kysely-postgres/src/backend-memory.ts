/**
 * What a 1000-row INSERT costs a PostgreSQL server process depending on what that process ran
 * before: the same rows with keys given, into the same table in three databases, each served by
 * one connection, with node-postgres alone, in a rotating order per insert, several rounds.
 *
 *   node src/backend-memory.ts [--rounds=7] [--inserts=16] [--database=sf_backend_memory]
 *   (PG_URL elsewhere than postgres://postgres@127.0.0.1:5432/test; run it on the database's
 *   machine: CPU time and page faults are read from /proc/<pid>/schedstat and /proc/<pid>/stat)
 *
 * Connections:
 * - fresh:         only the schema and the INSERTs;
 * - after install: `installPostgres()` ran on it first (as the benchmark used to do on the pool
 *                  of the database modes and `BIGSERIAL`);
 * - after 4 MB:    one statement with a 4 MB parameter ran on it first, nothing of shardflake.
 *
 * Per insert: the server process's CPU time and minor page faults; medians per round, then the
 * median round and the smallest and largest.
 */
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { allocateIds, defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { installPostgres } from '@shardflake/postgres'
import pg from 'pg'
import { schema } from './schema.ts'

const option = (name: string, fallback: string) =>
  process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
const rounds = Number(option('rounds', '7'))
const insertsPerRound = Number(option('inserts', '16'))
const prefix = `${option('database', 'sf_backend_memory')}_${process.pid}`
const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const source = new InProcessSource({ sharding, shards: 'all' })
const shards = 16
const size = 1000

const variants = ['fresh', 'after install', 'after 4 MB'] as const
const base = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
const urlOf = (name: string) => {
  const url = new URL(base)
  url.pathname = `/${name}`
  return url.toString()
}
const admin = new pg.Client({ connectionString: base.toString() })
await admin.connect()

interface Connection {
  name: string
  client: pg.Client
  pid: number
  authors: string[]
}
const connections: Connection[] = []
for (const [k, variant] of variants.entries()) {
  const name = `${prefix}_${k}`
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${name}`)
  const client = new pg.Client({ connectionString: urlOf(name) })
  await client.connect()
  for (const sql of schema) await client.query(sql)
  if (variant === 'after install') await installPostgres(client, { sharding, shards: 'all' })
  if (variant === 'after 4 MB') await client.query('SELECT length($1)', ['x'.repeat(4 << 20)])
  const authors: string[] = []
  for (let shard = 0; shard < shards; shard++) {
    const id = sharding.layout.composeTime(1, shard, 0, 0).toString()
    await client.query('INSERT INTO authors (id, email) VALUES ($1, $2)', [
      id,
      `author${shard}@example.com`,
    ])
    authors.push(id)
  }
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
  connections.push({ name, client, pid: rows[0]!.pid, authors })
}

const cpuMs = (pid: number) =>
  Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6
/** Minor page faults of a process so far (field 10 of /proc/<pid>/stat). */
const faults = (pid: number) =>
  Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[7])

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const perRound = variants.map(() => ({ cpu: [] as number[], faults: [] as number[] }))
const loadAtStart = loadavg()[0]!
let seed = 0
for (let round = 0; round <= rounds; round++) {
  const cpu = variants.map(() => [] as number[])
  const fault = variants.map(() => [] as number[])
  for (let n = 0; n < insertsPerRound; n++) {
    seed++
    for (let j = 0; j < variants.length; j++) {
      const k = (seed + j) % variants.length // each variant first, second and last in turn
      const { client, pid, authors } = connections[k]!
      const shard = seed % shards
      const ids = allocateIds(source, new Array<number>(size).fill(shard))
      const params: string[] = []
      const tuples: string[] = []
      for (let i = 0; i < size; i++) {
        params.push(ids[i]!.toString(), authors[shard]!, `post ${seed}.${i}`)
        tuples.push(`($${params.length - 2}, $${params.length - 1}, $${params.length})`)
      }
      const cpuBefore = cpuMs(pid)
      const faultsBefore = faults(pid)
      await client.query(
        `INSERT INTO posts (id, author_id, title) VALUES ${tuples.join(', ')} RETURNING id`,
        params,
      )
      cpu[k]!.push(cpuMs(pid) - cpuBefore)
      fault[k]!.push(faults(pid) - faultsBefore)
    }
  }
  if (round === 0) continue // warm-up
  variants.forEach((_, k) => {
    perRound[k]!.cpu.push(median(cpu[k]!))
    perRound[k]!.faults.push(median(fault[k]!))
  })
}

console.log(
  `INSERTs of ${size} rows with keys given, node-postgres alone, ${rounds} rounds of ${insertsPerRound} per connection; load average ${loadAtStart.toFixed(1)}-${loadavg()[0]!.toFixed(1)}`,
)
console.log(
  `${'connection'.padEnd(14)} ${'server cpu ms'.padStart(13)} ${'(min..max)'.padEnd(14)} ${'minor faults'.padStart(12)} (min..max)`,
)
variants.forEach((variant, k) => {
  const { cpu, faults: f } = perRound[k]!
  console.log(
    `${variant.padEnd(14)} ${median(cpu).toFixed(2).padStart(13)} ${`(${Math.min(...cpu).toFixed(2)}..${Math.max(...cpu).toFixed(2)})`.padEnd(14)} ${String(median(f)).padStart(12)} (${Math.min(...f)}..${Math.max(...f)})`,
  )
})
source.close()
for (const { client, name } of connections) {
  await client.end()
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
}
await admin.end()
