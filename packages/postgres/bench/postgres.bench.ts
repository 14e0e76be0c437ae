/**
 * next_id() against bare nextval(), next_ids(1000), and INSERT throughput with DEFAULT next_id()
 * or client-sent IDs against bigserial, with pgbench (real PostgreSQL, PG_URL). Each variant runs
 * back to back with its baseline, in alternating order, once per rep; a ratio is the median of the
 * per-pair ratios, so load that drifts over seconds on a shared machine falls on both sides alike.
 *
 *   node bench/postgres.bench.ts [--seconds 2] [--reps 7] [--cells <regex>] [--json] [--chart <file>]
 *
 * `--cells` runs only the variants whose name (`next_id@8`, `insert1000_client@1`, ...) matches
 * the regular expression, each with its baseline: a long run can be split into several.
 * `--chart` also writes every pair's figures for bench-charts (see bench-charts/README.md): one
 * panel per variant, its row and its baseline's, one value per pair in run order.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { defineSharding, instagram } from '@shardflake/core'
import { installPostgres } from '@shardflake/postgres'
import pg from 'pg'

const args = process.argv.slice(2)
const option = (name: string, fallback: number) => {
  const index = args.indexOf(`--${name}`)
  return index >= 0 ? Number(args[index + 1]) : fallback
}
const seconds = option('seconds', 2)
const reps = option('reps', 7)
const json = args.includes('--json')
const cellsIndex = args.indexOf('--cells')
const only = cellsIndex >= 0 ? new RegExp(args[cellsIndex + 1] ?? '') : undefined
const chartIndex = args.indexOf('--chart')
const chartFile = chartIndex >= 0 ? args[chartIndex + 1] : undefined
const loadStart = loadavg()
const serverUrl = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
// Per run: two benchmark runs (or a test run) never drop each other's database (PG_BENCH_DB
// names it instead).
const DB = process.env.PG_BENCH_DB ?? `sf_pg_bench_${process.pid}`

const url = new URL(serverUrl)
url.pathname = `/${DB}`
const admin = new pg.Client({ connectionString: serverUrl })
await admin.connect()
await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`)
await admin.query(`CREATE DATABASE ${DB}`)
const { rows: versionRows } = await admin.query<{ server_version: string }>('SHOW server_version')
const serverVersion = versionRows[0]!.server_version.split(' ')[0]!
const pool = new pg.Pool({ connectionString: url.toString(), max: 2 })
// An idle connection terminated from outside must not crash the run.
pool.on('error', () => undefined)
admin.on('error', () => undefined)
await installPostgres(pool, {
  sharding: defineSharding({ layout: instagram, logicalShards: 2000 }),
  shards: [5],
})
await pool.query(`
  CREATE SEQUENCE bench_seq;
  CREATE TABLE t_serial (id bigserial PRIMARY KEY, payload int NOT NULL);
  CREATE TABLE t_default (id bigint PRIMARY KEY DEFAULT shard_5.next_id(), payload int NOT NULL);
  CREATE TABLE t_client (id bigint PRIMARY KEY, payload int NOT NULL);
`)

const dir = mkdtempSync(join(tmpdir(), 'sf-pg-bench-'))
const values1000 = Array.from({ length: 1000 }, () => '(1)').join(',')
const scripts: Record<string, string> = {
  nextval: `SELECT nextval('bench_seq');`,
  next_id: 'SELECT shard_5.next_id();',
  next_ids_100: 'SELECT count(*) FROM shard_5.next_ids(100);',
  next_ids_1000: 'SELECT count(*) FROM shard_5.next_ids(1000);',
  insert_serial: 'INSERT INTO t_serial (payload) VALUES (1);',
  insert_default: 'INSERT INTO t_default (payload) VALUES (1);',
  insert1000_serial: `INSERT INTO t_serial (payload) VALUES ${values1000};`,
  insert1000_default: `INSERT INTO t_default (payload) VALUES ${values1000};`,
  insert1000_client:
    "SELECT array_to_string(ARRAY(SELECT shard_5.next_ids(1000)), ',') AS ids \\gset\nINSERT INTO t_client (id, payload) SELECT unnest(string_to_array(:ids, ',')::bigint[]), 1;",
}
for (const [name, body] of Object.entries(scripts))
  writeFileSync(join(dir, `${name}.sql`), `${body}\n`)

interface Cell {
  script: string
  clients: number
  idsPerTx: number
  baseline?: string
}
const key = (script: string, clients: number) => `${script}@${clients}`
const cells: Cell[] = [
  { script: 'nextval', clients: 1, idsPerTx: 1 },
  { script: 'next_id', clients: 1, idsPerTx: 1, baseline: key('nextval', 1) },
  { script: 'nextval', clients: 8, idsPerTx: 1 },
  { script: 'next_id', clients: 8, idsPerTx: 1, baseline: key('nextval', 8) },
  { script: 'next_ids_100', clients: 1, idsPerTx: 100, baseline: key('next_id', 1) },
  { script: 'next_ids_1000', clients: 1, idsPerTx: 1000, baseline: key('next_id', 1) },
  { script: 'next_ids_1000', clients: 8, idsPerTx: 1000, baseline: key('next_id', 8) },
  { script: 'insert_serial', clients: 1, idsPerTx: 1 },
  { script: 'insert_default', clients: 1, idsPerTx: 1, baseline: key('insert_serial', 1) },
  { script: 'insert_serial', clients: 8, idsPerTx: 1 },
  { script: 'insert_default', clients: 8, idsPerTx: 1, baseline: key('insert_serial', 8) },
  { script: 'insert1000_serial', clients: 1, idsPerTx: 1000 },
  {
    script: 'insert1000_default',
    clients: 1,
    idsPerTx: 1000,
    baseline: key('insert1000_serial', 1),
  },
  {
    script: 'insert1000_client',
    clients: 1,
    idsPerTx: 1000,
    baseline: key('insert1000_serial', 1),
  },
  { script: 'insert1000_serial', clients: 8, idsPerTx: 1000 },
  {
    script: 'insert1000_default',
    clients: 8,
    idsPerTx: 1000,
    baseline: key('insert1000_serial', 8),
  },
  {
    script: 'insert1000_client',
    clients: 8,
    idsPerTx: 1000,
    baseline: key('insert1000_serial', 8),
  },
]

function pgbench(cell: Cell): number {
  const output = execFileSync(
    'pgbench',
    [
      '-n',
      '-M',
      'prepared',
      '-T',
      String(seconds),
      '-c',
      String(cell.clients),
      '-j',
      String(Math.min(cell.clients, 2)),
      '-f',
      join(dir, `${cell.script}.sql`),
      url.toString(),
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  )
  const match = /tps = ([\d.]+) \(without initial connection time\)/.exec(output)
  if (!match) throw new Error(`pgbench printed no tps:\n${output}`)
  return Number(match[1])
}

const results = new Map<string, number[]>()
/** Ratios of each variant to its baseline, one per rep, each from two runs back to back. */
const pairRatios = new Map<string, number[]>()
/** Each variant's pairs, in run order: its baseline's IDs/s and its own. */
const pairs = new Map<string, { base: number[]; cell: number[] }>()
const record = (map: Map<string, number[]>, name: string, value: number) => {
  const list = map.get(name) ?? []
  list.push(value)
  map.set(name, list)
}
const run = async (cell: Cell): Promise<number> => {
  if (cell.script.startsWith('insert')) {
    await pool.query('TRUNCATE t_serial, t_default, t_client')
    await pool.query('CHECKPOINT')
  }
  const ids = pgbench(cell) * cell.idsPerTx
  record(results, key(cell.script, cell.clients), ids)
  if (!json) process.stderr.write(`${key(cell.script, cell.clients)}: ${Math.round(ids)} IDs/s\n`)
  return ids
}
const byKey = new Map(cells.map((cell) => [key(cell.script, cell.clients), cell]))
/** The variants to run (each with its baseline). */
const selected = cells.flatMap((cell) =>
  cell.baseline && (!only || only.test(key(cell.script, cell.clients)))
    ? [{ cell, base: byKey.get(cell.baseline)! }]
    : [],
)
/** The 1-minute load average at the start of every rep, and at the end. */
const loads: number[] = []
for (let rep = 0; rep < reps; rep++) {
  loads.push(loadavg()[0]!)
  if (!json)
    process.stderr.write(`rep ${rep + 1}/${reps} (load average ${loads.at(-1)!.toFixed(2)})\n`)
  for (const { cell, base } of selected) {
    // The variant and its baseline back to back, in alternating order, so that the load of a
    // shared machine (which drifts over seconds) falls on both sides of each ratio alike.
    const first = rep % 2 === 0 ? base : cell
    const second = first === base ? cell : base
    const a = await run(first)
    const b = await run(second)
    const [baseIds, cellIds] = first === base ? [a, b] : [b, a]
    record(pairRatios, key(cell.script, cell.clients), cellIds / baseIds)
    const pair = pairs.get(key(cell.script, cell.clients)) ?? { base: [], cell: [] }
    pair.base.push(baseIds)
    pair.cell.push(cellIds)
    pairs.set(key(cell.script, cell.clients), pair)
  }
}
await pool.end().catch(() => undefined)
await admin
  .query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`)
  .then(() => admin.end())
  .catch(() => undefined)

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
const rows = cells
  .filter((cell) => results.has(key(cell.script, cell.clients)))
  .map((cell) => {
    const values = results.get(key(cell.script, cell.clients))!
    const ratios = pairRatios.get(key(cell.script, cell.clients))
    return {
      cell: key(cell.script, cell.clients),
      idsPerSecond: Math.round(median(values)),
      min: Math.round(Math.min(...values)),
      max: Math.round(Math.max(...values)),
      baseline: cell.baseline ?? null,
      ratio: ratios ? Number(median(ratios).toFixed(2)) : null,
      ratioMin: ratios ? Number(Math.min(...ratios).toFixed(2)) : null,
      ratioMax: ratios ? Number(Math.max(...ratios).toFixed(2)) : null,
    }
  })
const loadEnd = loadavg()
loads.push(loadEnd[0]!)
const loadRange = `${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`

/** Each variant's panel of the chart: its title (the baseline named) and the variant's label. */
const panels: Record<string, [title: string, label: string]> = {
  next_id: ['next_id() against nextval()', 'next_id()'],
  next_ids_100: ['next_ids(100) against next_id()', 'next_ids(100)'],
  next_ids_1000: ['next_ids(1000) against next_id()', 'next_ids(1000)'],
  insert_default: ['Single-row INSERT: DEFAULT next_id() against bigserial', 'DEFAULT next_id()'],
  insert1000_default: ['1000-row INSERT: DEFAULT next_id() against bigserial', 'DEFAULT next_id()'],
  insert1000_client: [
    '1000-row INSERT: IDs from next_ids(1000), then sent, against bigserial',
    'IDs sent by the client',
  ],
}
if (chartFile) {
  const chart = {
    title: 'PostgreSQL next_id() and next_ids(n) against nextval() and bigserial',
    unit: 'IDs/s',
    note: [
      `${new Date().toISOString().slice(0, 10)}, PostgreSQL ${serverVersion}, pgbench -M prepared, ${reps} pairs of ${seconds} s runs per variant, Node ${process.versions.node}`,
      `Load average ${loadRange} (1 min, at the start of every rep and at the end) on ${availableParallelism()} shared cores`,
    ],
    baseline: 'baseline',
    roundName: 'pair',
    rows: selected.flatMap(({ cell }) => {
      const pair = pairs.get(key(cell.script, cell.clients))!
      const [title, label] = panels[cell.script]!
      const group = `${title}, ${cell.clients} client${cell.clients > 1 ? 's' : ''}`
      return [
        { group, label: 'baseline', values: pair.base.map(Math.round) },
        { group, label, values: pair.cell.map(Math.round) },
      ]
    }),
  }
  writeFileSync(chartFile, JSON.stringify(chart))
}

if (json) {
  console.log(
    JSON.stringify(
      { seconds, reps, serverVersion, load: { loadStart, loadEnd, loads }, rows },
      null,
      2,
    ),
  )
} else {
  console.log(
    `${new Date().toISOString()}, PostgreSQL ${serverVersion}, load average at the start ${loadStart
      .map((l) => l.toFixed(2))
      .join(
        ' ',
      )}, at the end ${loadEnd.map((l) => l.toFixed(2)).join(' ')}, 1-min range ${loadRange}`,
  )
  console.log(
    `| cell | IDs/s (median of ${seconds} s runs) | min..max | baseline | ratio (median of ${reps} pairs) | ratio min..max |`,
  )
  console.log('|---|---:|---:|---|---:|---:|')
  for (const row of rows) {
    console.log(
      `| ${row.cell} | ${row.idsPerSecond.toLocaleString('en')} | ${row.min.toLocaleString('en')}..${row.max.toLocaleString('en')} | ${row.baseline ?? ''} | ${row.ratio ?? ''} | ${row.ratio === null ? '' : `${row.ratioMin}..${row.ratioMax}`} |`,
    )
  }
}
