/**
 * The stored-procedure ID experiment, redone on TypeORM: insert N posts one `save()` at a time (or in batches),
 * once into a table whose key comes from shardflake before the INSERT and once into an
 * AUTO_INCREMENT table of the same shape, and compare. Each table grows from empty to N rows in
 * `--rounds` alternating rounds (which table goes first alternates); throughput is the median of
 * the rounds, the ratio the median of the per-round ratios, latencies are per save() call.
 *
 *   node dist/bench.js                          # MariaDB/MySQL, MysqlSource (stored routines),
 *                                               # with and without a prefetch buffer
 *   node dist/bench.js --db postgres            # PostgreSQL, InProcessSource vs an identity column
 *   node dist/bench.js --counts 100,5000        # smaller runs
 *   node dist/bench.js --batch 1000 --json      # 1000 rows per save(), JSON out
 *   node dist/bench.js --save results.json      # the table, and the JSON into a file
 *   node dist/bench.js --batch 1000 --sort      # each batch ordered by shard (ascending IDs)
 *   node dist/bench.js --prefetch 0             # MySQL: no prefetch variant
 *   node dist/bench.js --in-process             # MySQL: and a table keyed by the in-process source
 *   node dist/bench.js --chart chart.json       # and every round's rows/s for bench-charts
 *
 * `--chart <file>` writes the figures of every round for bench-charts (see bench-charts/README.md):
 * one group per server, batch size and row count. Groups already in the file from other settings
 * are kept, so one file collects the runs of the `bench` script.
 *
 * MYSQL_URL / PG_URL point at the server (defaults: root@127.0.0.1:3306, postgres@127.0.0.1:5432);
 * the benchmark makes its own databases, named sf_typeorm_example*.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { defaults, type Report, runBenchmark } from './benchmark.ts'

/** The label of every group's baseline row: AUTO_INCREMENT on MariaDB/MySQL, identity on PostgreSQL. */
const baselineLabel = 'database-generated key'

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: defaults.db },
    counts: { type: 'string', default: defaults.counts.join(',') },
    rounds: { type: 'string', default: String(defaults.rounds) },
    batch: { type: 'string', default: String(defaults.batch) },
    users: { type: 'string', default: String(defaults.users) },
    shards: { type: 'string', default: String(defaults.logicalShards) },
    sort: { type: 'boolean', default: false },
    prefetch: { type: 'string', default: String(defaults.prefetch) },
    'max-age': { type: 'string', default: String(defaults.maxAgeMs) },
    database: { type: 'string', default: defaults.database },
    'in-process': { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    save: { type: 'string' },
    chart: { type: 'string' },
  },
})

const report = await runBenchmark({
  db: args.db === 'postgres' ? 'postgres' : 'mysql',
  counts: args.counts.split(',').map(Number),
  rounds: Number(args.rounds),
  batch: Number(args.batch),
  users: Number(args.users),
  logicalShards: Number(args.shards),
  sort: args.sort,
  prefetch: Number(args.prefetch),
  maxAgeMs: Number(args['max-age']),
  database: args.database,
  inProcess: args['in-process'],
})
if (args.save) writeFileSync(args.save, `${JSON.stringify(report, null, 2)}\n`)
if (args.chart) writeChart(args.chart, report)
if (args.json) {
  console.log(JSON.stringify(report, null, 2))
} else {
  print(report)
}

function print(report: Report) {
  const { db: server, results, loadAverage: load, batch, rounds, users, logicalShards } = report
  const mode =
    batch === 1
      ? 'one row per save()'
      : `${batch} rows per save()${report.sorted ? ', sorted by shard' : ''}`
  console.log(
    `${server} · TypeORM · ${mode} · ${rounds} alternating rounds (medians) · ${users} users on ${logicalShards} logical shards`,
  )
  console.log(
    `load average (1/5/15 min) at start and after each row count: ${load.map((values) => values.join(' ')).join(' → ')}\n`,
  )
  const header = ['rows', 'key', 'rows/s', 'ratio', 'p50 ms', 'p99 ms', 'table KiB', 'index KiB']
  const lines = results.map((r) => [
    r.rows.toLocaleString('en-US'),
    r.variant,
    Math.round(r.rowsPerSecond).toLocaleString('en-US'),
    r.ratio === null ? '1.00' : r.ratio.toFixed(2),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    Math.round(r.tableBytes / 1024).toLocaleString('en-US'),
    Math.round(r.indexBytes / 1024).toLocaleString('en-US'),
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => line[i]!.length)))
  const row = (cells: string[]) =>
    `| ${cells.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join(' | ')} |`
  console.log(row(header))
  console.log(
    `|${widths.map((w, i) => (i < 2 ? `${'-'.repeat(w + 2)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
  )
  for (const line of lines) console.log(row(line))
}

interface ChartRow {
  label: string
  group: string
  values: number[]
}

/** What one run measured, as the chart names it: `MariaDB, 1 row per save()`. */
function settingOf(report: Report): string {
  const server = report.db.split(' ')[0]
  const rows = report.batch === 1 ? '1 row per save()' : `${report.batch} rows per save()`
  return `${server}, ${rows}${report.sorted ? ', sorted by shard' : ''}`
}

/** The rows and note lines of an existing chart file, or none. */
function readChart(file: string): { rows: ChartRow[]; note: string[] } {
  if (!existsSync(file)) return { rows: [], note: [] }
  const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'))
  if (typeof parsed !== 'object' || parsed === null) return { rows: [], note: [] }
  const rows: ChartRow[] = []
  const found = 'rows' in parsed && Array.isArray(parsed.rows) ? parsed.rows : []
  for (const row of found) {
    if (typeof row !== 'object' || row === null) continue
    const { label, group, values } = row
    if (typeof label !== 'string' || typeof group !== 'string' || !Array.isArray(values)) continue
    rows.push({ label, group, values: values.filter((v) => typeof v === 'number') })
  }
  const lines = 'note' in parsed && Array.isArray(parsed.note) ? parsed.note : []
  return { rows, note: lines.filter((line) => typeof line === 'string') }
}

/**
 * Writes (or updates) the results JSON bench-charts draws: this run's rows/s per round, one group
 * per row count, replacing the groups an earlier run of the same setting left in the file.
 */
function writeChart(file: string, report: Report) {
  const setting = settingOf(report)
  const old = readChart(file)
  const ours = (group: string) => group.split(' · ')[0] === setting
  const fresh: ChartRow[] = report.results.map((result) => ({
    label:
      result.ratio === null ? baselineLabel : result.variant.replace(/^@ShardedId \((.*)\)$/, '$1'),
    group: `${setting} · ${result.rows.toLocaleString('en-US')} rows`,
    values: result.roundsPerSecond.map((value) => Number(value.toPrecision(4))),
  }))
  const at = old.rows.findIndex((row) => ours(row.group))
  const kept = old.rows.filter((row) => !ours(row.group))
  const rows = at < 0 ? [...kept, ...fresh] : [...kept.slice(0, at), ...fresh, ...kept.slice(at)]
  const loads = report.loadAverage.map((values) => values[0]!)
  const line = `${setting}: ${report.rounds} rounds, ${new Date().toISOString().slice(0, 10)}, load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)} on ${availableParallelism()} cores`
  const settings = [...new Set(rows.map((row) => row.group.split(' · ')[0]!))]
  const notes = [...old.note.filter((text) => !text.startsWith(`${setting}:`)), line]
  const byGroup = (text: string) => settings.findIndex((name) => text.startsWith(`${name}:`))
  const chart = {
    title: 'TypeORM save(): @ShardedId against a database-generated key',
    unit: 'rows/s',
    note: notes.filter((text) => byGroup(text) >= 0).sort((a, b) => byGroup(a) - byGroup(b)),
    baseline: baselineLabel,
    rows,
  }
  writeFileSync(file, JSON.stringify(chart))
}
