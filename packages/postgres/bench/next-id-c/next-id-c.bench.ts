/**
 * What bounds next_id() against nextval(): version 6 (SQL), its fast path in C, and the least a C
 * next_id() can do, in one session, in server CPU time (`/proc/<pid>/schedstat` of the session's
 * server process, so the bench must run on the database's machine). Each variant runs back to
 * back with its baseline, in alternating order, once per round; a ratio is baseline CPU time per
 * ID over the variant's, median of the rounds (min..max).
 *
 *   make && sudo make install      (in this directory: the prototype extension, PGXS)
 *   pnpm --filter @shardflake/postgres build
 *   node bench/next-id-c/next-id-c.bench.ts [--rounds 11]
 *
 * Draws in a loop and 1000-row INSERTs are prepared statements; single statements are not
 * (planning them, which inlines an SQL next_id(), is part of their cost).
 *
 * PG_URL names the server (default postgres://postgres@127.0.0.1:5432/test); the bench creates a
 * database of its own there (PG_BENCH_DB, default sf_pg_next_id_c_<pid>) and drops it at the end.
 */
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { defineSharding, instagram } from '@shardflake/core'
import { installPostgres } from '@shardflake/postgres'
import pg from 'pg'

const args = process.argv.slice(2)
const roundsAt = args.indexOf('--rounds')
const rounds = roundsAt >= 0 ? Number(args[roundsAt + 1]) : 11
const serverUrl = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const DB = process.env.PG_BENCH_DB ?? `sf_pg_next_id_c_${process.pid}`
const url = new URL(serverUrl)
url.pathname = `/${DB}`

const admin = new pg.Client({ connectionString: serverUrl })
await admin.connect()
await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`)
await admin.query(`CREATE DATABASE ${DB}`)
const db = new pg.Client({ connectionString: url.toString() })
await db.connect()
const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
await installPostgres(db, { sharding, shards: [5] })

// The numbers shard 5's SQL is made of (options.ts: numbers, shardContext), default options.
const L = instagram
const perUnit = 2n ** BigInt(L.sequenceBits)
const shape = [
  L.epoch,
  L.timeUnitMs,
  L.sequenceBits,
  BigInt(Math.ceil(50 / L.timeUnitMs)) * perUnit,
  BigInt(Math.ceil(1000 / L.timeUnitMs)) * perUnit,
  L.shifts.time,
  5n << BigInt(L.shifts.shard),
  L.shifts.sequence,
].join(', ')
const settle = `'shard_5._settle(bigint,bigint,bigint)'::regprocedure`
const gen = `'shard_5.id_gen'::regclass`
await db.query(`
  CREATE EXTENSION shardflake_next_id_proto;
  CREATE FUNCTION shard_5.next_id_accept() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT proto_accept(pg_sequence_last_value(${gen}), nextval('shard_5.id_seq'::regclass),
      pg_sequence_last_value(${gen}), proto_now_ms(), ${shape}, ${settle})
  $$;
  SELECT proto_configure('shard_5.id_seq'::regclass, ${gen}, ${shape}, ${settle});
  CREATE SEQUENCE bench_seq;
  CREATE TABLE t_serial (id bigserial PRIMARY KEY, payload int NOT NULL);
  CREATE TABLE t_v6 (id bigint PRIMARY KEY DEFAULT shard_5.next_id(), payload int NOT NULL);
  CREATE TABLE t_accept (id bigint PRIMARY KEY DEFAULT shard_5.next_id_accept(), payload int NOT NULL);
  CREATE TABLE t_bound (id bigint PRIMARY KEY DEFAULT proto_next_id(), payload int NOT NULL);
  CREATE SEQUENCE gen_seq;
  CREATE TABLE t_gen (id bigint PRIMARY KEY DEFAULT nextval('gen_seq') + coalesce(pg_sequence_last_value(${gen}), 0), payload int NOT NULL);
  CREATE SEQUENCE clock_seq;
  CREATE TABLE t_clock (id bigint PRIMARY KEY DEFAULT nextval('clock_seq') + 0 * proto_now_ms(), payload int NOT NULL);
  SET synchronous_commit = off;
`)
// The C variants make IDs of shard 5 carrying the clock's time, as next_id() does.
const check = await db.query(
  `SELECT shardflake.shardflake_shard(x) AS shard, abs(extract(epoch FROM clock_timestamp() - shardflake.shardflake_timestamp(x))) < 1 AS now
   FROM (VALUES (shard_5.next_id()), (shard_5.next_id_accept()), (proto_next_id())) AS ids (x)`,
)
if (!check.rows.every((row) => row.shard === 5 && row.now === true))
  throw new Error(`unexpected IDs: ${JSON.stringify(check.rows)}`)

const pid = (await db.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number
const cpuNs = () => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0])
const values1000 = Array.from({ length: 1000 }, () => '(1)').join(',')
const loop = (expression: string) => ({
  sql: `SELECT count(${expression}) FROM generate_series(1, 200000)`,
  ids: 200_000,
  times: 1,
})
const insert = (table: string) => ({
  sql: `INSERT INTO ${table} (payload) VALUES ${values1000}`,
  ids: 1000,
  times: 50,
})
/** One ID per statement, not prepared (planned every time). */
const single = (sql: string) => ({ sql, ids: 1, times: 500, unprepared: true })
const cells: Record<string, { sql: string; ids: number; times: number; unprepared?: boolean }> = {
  loop_nextval: loop(`nextval('bench_seq')`),
  loop_v6: loop('shard_5.next_id()'),
  loop_accept: loop('shard_5.next_id_accept()'),
  loop_bound: loop('proto_next_id()'),
  insert_serial: insert('t_serial'),
  insert_v6: insert('t_v6'),
  insert_accept: insert('t_accept'),
  insert_bound: insert('t_bound'),
  insert_gen: insert('t_gen'),
  insert_clock: insert('t_clock'),
  select_nextval: single(`SELECT nextval('bench_seq')`),
  select_v6: single('SELECT shard_5.next_id()'),
  select_accept: single('SELECT shard_5.next_id_accept()'),
  select_bound: single('SELECT proto_next_id()'),
  insert1_serial: single('INSERT INTO t_serial (payload) VALUES (1)'),
  insert1_v6: single('INSERT INTO t_v6 (payload) VALUES (1)'),
  insert1_accept: single('INSERT INTO t_accept (payload) VALUES (1)'),
  insert1_bound: single('INSERT INTO t_bound (payload) VALUES (1)'),
}
type Cell = string
const pairs: [Cell, Cell][] = [
  ['loop_v6', 'loop_nextval'],
  ['loop_accept', 'loop_nextval'],
  ['loop_bound', 'loop_nextval'],
  ['insert_v6', 'insert_serial'],
  ['insert_accept', 'insert_serial'],
  ['insert_bound', 'insert_serial'],
  ['insert_gen', 'insert_serial'],
  ['insert_clock', 'insert_serial'],
  ['select_v6', 'select_nextval'],
  ['select_accept', 'select_nextval'],
  ['select_bound', 'select_nextval'],
  ['insert1_v6', 'insert1_serial'],
  ['insert1_accept', 'insert1_serial'],
  ['insert1_bound', 'insert1_serial'],
]
/** Nanoseconds of server CPU per ID. */
async function run(cell: Cell): Promise<number> {
  const { sql, ids, times, unprepared } = cells[cell]!
  const before = cpuNs()
  for (let i = 0; i < times; i++) await db.query(unprepared ? sql : { name: cell, text: sql })
  return (cpuNs() - before) / (ids * times)
}
const ns = new Map<Cell, number[]>()
const ratios = new Map<string, number[]>()
const loads: number[] = []
for (let round = 0; round < rounds; round++) {
  loads.push(loadavg()[0]!)
  for (const [cell, base] of pairs) {
    const [first, second] = round % 2 ? [cell, base] : [base, cell]
    const a = await run(first)
    const b = await run(second)
    const [own, theirs] = first === cell ? [a, b] : [b, a]
    ns.set(cell, [...(ns.get(cell) ?? []), own])
    ns.set(base, [...(ns.get(base) ?? []), theirs])
    ratios.set(cell, [...(ratios.get(cell) ?? []), theirs / own])
  }
  await db.query('TRUNCATE t_serial, t_v6, t_accept, t_bound, t_gen, t_clock')
}
await db.end()
await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`)
await admin.end()

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
const spread = (values: number[], digits: number) =>
  `${Math.min(...values).toFixed(digits)}..${Math.max(...values).toFixed(digits)}`
console.log(
  `${new Date().toISOString()}, ${rounds} rounds, load average (1 min) ${spread(loads, 1)}`,
)
console.log(
  '| cell | ns of server CPU per ID (median) | min..max | baseline | ratio (median) | min..max |',
)
console.log('|---|---:|---|---|---:|---|')
for (const [cell, base] of pairs) {
  const own = ns.get(cell)!
  const ratio = ratios.get(cell)!
  console.log(
    `| ${cell} | ${Math.round(median(own))} | ${spread(own, 0)} | ${base} ${Math.round(median(ns.get(base)!))} | ${median(ratio).toFixed(2)} | ${spread(ratio, 2)} |`,
  )
}
