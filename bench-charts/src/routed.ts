/**
 * What the adapters' routed-write benchmarks share: three throwaway databases playing servers a,
 * b and c (logical shards 0-20, 21-41 and 42-63 of 64), the INSERT statements each one received,
 * and router-against-one-server rounds of A-B-B-A slices with wall and client CPU time, written
 * as JSON and as a chart (`routed.chart.json`, drawn by this package's CLI).
 *
 * A bench keeps its ORM's setup and its two writes:
 *
 * ```ts
 * const bench = await routedBench({ adapter: 'TypeORM 1.1.1', prefix: 'sf_bench_routed_typeorm_' })
 * // ... one ORM instance per server on bench.urls.a/b/c (logging into bench.sent), a router
 * const overhead = await bench.compare({
 *   router: (size) => sharded.save(Keyed, bench.rows(size)),
 *   direct: (size) => direct.manager.save(Keyed, bench.rows(size)),
 * })
 * const statements = await bench.statements(() => sharded.save(Keyed, bench.rows(1000, 'all')))
 * await bench.finish({ statements, overhead }, () => closeEverything())
 * ```
 *
 * The direct side writes on the connections of the router's server a (an instance of the ORM that
 * is not routed, over the same pool). Both sides get the same history: `compare` runs before
 * anything else is written (`statements` refuses to run first), and the harness empties server a's
 * table between rounds on a connection of its own. A server connection that once ran a large
 * statement can keep the memory it freed and answer later statements with less work; a side whose
 * connections ran more, or larger, statements than the other's would not be timed on the same
 * server.
 *
 * Environment: ROUNDS (21, after WARMUP warm-up rounds, 3, and as many more as make WARMUP_WRITES
 * writes of each side: 4000 single rows, 1000 writes of 1000 rows), SINGLE_TIMES (3000 single-row writes
 * per slice), BATCH_TIMES (50 1000-row writes per slice), SHAPES (`1,1000`: the rows per write of
 * the shapes to run), PG_URL, MYSQL_URL, DB_PREFIX; KEYS (`digits`, the default: keys '0' to '63',
 * read as integers; `text`: keys such as 'tenant-17', hashed, one per shard); CONCURRENCY (1: each
 * write waits for the one before it; N: N writes in flight at once, each side over the same
 * connections, as a web server's requests would be); ONLY (`router` or `direct`) times that side
 * in both places, for a check of the rounds (ratios about 1); SLICES, a file for the timed slices
 * (to split a `node --cpu-prof` or `perf` profile by side; `instructions.ts` sets it).
 * Arguments: `--json` prints the results as JSON only; `--chart <file>` also writes the chart's
 * JSON there.
 */
import { readFileSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { loadavg } from 'node:os'
import {
  defineSharding,
  InProcessSource,
  instagram,
  type Sharding,
  ShardMap,
} from '@shardflake/core'
import mysql from 'mysql2/promise'
import pg from 'pg'
import type { BenchResults } from './results.ts'
import { median } from './summary.ts'

/** The three servers, in order. */
export const SERVERS = ['a', 'b', 'c'] as const
export type Server = (typeof SERVERS)[number]
export type PerServer<T> = Record<Server, T>

/** The logical shards of each server: a 0-20, b 21-41, c 42-63. */
const RANGES: Record<Server, readonly [number, number]> = { a: [0, 20], b: [21, 41], c: [42, 63] }

export type Dialect = 'postgres' | 'mysql'

export interface RoutedBenchOptions<K extends string = 'shardKey'> {
  /** The ORM and its version, for the chart's title: `TypeORM 1.1.1`. */
  adapter: string
  /** The databases' names start with it (`DB_PREFIX` overrides it). */
  prefix: string
  /** The server the three databases live on. @default 'postgres' */
  dialect?: Dialect
  /** The shard key's column in `keyed`, as the ORM names it in a row. @default 'shardKey' */
  keyField?: K
}

/** One side against the other, per round: the ratio router ÷ direct. */
export interface Spread {
  median: number
  min: number
  max: number
}

export interface ShapeResult {
  rounds: number
  /** Rounds run and not timed before them. */
  warmupRounds: number
  writesPerSlice: number
  /** Router ÷ direct wall time, per round. */
  wall: Spread
  /** Router ÷ direct CPU time of this process (user + system), per round. */
  cpu: Spread
  /** Median milliseconds per write. */
  msPerWrite: { router: number; direct: number }
  /** Per round: wall and CPU milliseconds per write of each side. */
  perRound: {
    routerMs: number[]
    directMs: number[]
    routerCpuMs: number[]
    directCpuMs: number[]
  }
}

export interface Sides {
  /** `size` rows of server a's shards, through the router. */
  router: (size: number) => Promise<unknown>
  /**
   * The same rows on server a's database, not routed, over the pool the router writes through
   * there: a side that wrote on connections of its own would be timed against another server
   * process for the whole run, a difference the A-B-B-A order cannot cancel.
   */
  direct: (size: number) => Promise<unknown>
}

export interface StatementCounts {
  /** INSERT statements on `keyed` each server counted. */
  inserts: PerServer<number>
  /** Statements the ORM sent each server (its logger, counted into `bench.sent`). */
  sent: PerServer<number>
  /** Rows on each server afterwards. */
  rows: PerServer<number>
}

export interface RoutedBench<K extends string = 'shardKey'> {
  readonly json: boolean
  readonly rounds: number
  readonly dialect: Dialect
  readonly sharding: Sharding
  /** One source for the run: a logical shard has one generator per process. */
  readonly source: InProcessSource
  /** The directory: shards 0-20 on a, 21-41 on b, 42-63 on c. */
  readonly map: ShardMap<Server>
  /** Each server's database URL. */
  readonly urls: PerServer<string>
  /** Statements sent per server: let each server's ORM logger call `bench.countSent(name)`. */
  readonly sent: PerServer<number>
  countSent(server: Server): () => void
  log(line: string): void
  /**
   * `size` rows `{ [keyField]: key }`: over all 64 shards (`'all'`), or over server a's shards
   * (the default), the rows the router-against-direct rounds write.
   */
  rows(size: number, over?: 'a' | 'all'): Record<K, string>[]
  /**
   * Runs `write` once and counts what each server received. Runs after `compare` (it throws
   * otherwise): its write would leave the router's connections with a history the direct side's
   * do not have. `inserts` counts the INSERTs itself
   * (MariaDB's `Com_insert` of the router's sessions); by default a statement trigger counts them.
   */
  statements(
    write: () => Promise<unknown>,
    inserts?: () => Promise<PerServer<number>>,
  ): Promise<StatementCounts>
  /**
   * Router against direct, single rows and 1000 rows, A-B-B-A per round after the warm-up rounds;
   * server a's table is emptied after each round, on a connection of the harness.
   */
  compare(sides: Sides): Promise<Record<string, ShapeResult>>
  /** The chart of `compare`'s figures, one panel per shape and time. */
  chart(overhead: Record<string, ShapeResult>, label?: string): BenchResults
  /**
   * Runs `close` (the ORMs), drops the databases, then prints the results as JSON with `--json`
   * (unless `print` is false) and writes the chart's JSON to `chart` (`--chart <file>` by
   * default). Returns the results with the load averages.
   */
  finish(
    results: { statements: StatementCounts; overhead: Record<string, ShapeResult> } & Record<
      string,
      unknown
    >,
    close: () => Promise<unknown>,
    output?: { chart?: string | undefined; print?: boolean },
  ): Promise<Record<string, unknown>>
  /** Drops the databases, without printing anything. */
  drop(): Promise<void>
}

const argv = process.argv.slice(2)
const chartIndex = argv.indexOf('--chart')
/** Where `--chart` asks the chart's JSON to go. */
export const chartPath = chartIndex >= 0 ? argv[chartIndex + 1] : undefined

/** Creates (afresh) the three databases, each with `keyed` and its INSERT statement counter. */
export async function routedBench<K extends string = 'shardKey'>(
  options: RoutedBenchOptions<K>,
): Promise<RoutedBench<K>> {
  const json = argv.includes('--json')
  const rounds = Number(process.env.ROUNDS ?? 21)
  const dialect = options.dialect ?? 'postgres'
  const keyField = options.keyField ?? ('shardKey' as K)
  const prefix = process.env.DB_PREFIX ?? options.prefix
  if (!/^[a-z_][a-z0-9_]{0,40}$/.test(prefix)) {
    throw new Error(`DB_PREFIX: not a safe name: ${prefix}`)
  }
  const base =
    dialect === 'postgres'
      ? (process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
      : (process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
  const log = (line: string) => {
    if (!json) console.log(line)
  }
  const loadavgStart = loadavg()
  log(`${dialect}: load average at start ${loadavgStart.map((n) => n.toFixed(1)).join(' ')}`)

  const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
  const source = new InProcessSource({ sharding, shards: 'all' })
  const map = new ShardMap(
    sharding,
    SERVERS.map((target) => ({ from: RANGES[target][0], to: RANGES[target][1], target })),
  )
  const databaseOf = (server: Server) => `${prefix}${server}`
  const urlOf = (server: Server) => {
    const url = new URL(base)
    url.pathname = `/${databaseOf(server)}`
    return url.toString()
  }

  /** Runs statements on the server itself (`server` undefined) or on one server's database. */
  async function run(server: Server | undefined, statements: string[]): Promise<unknown[][]> {
    const url = server ? urlOf(server) : base
    const results: unknown[][] = []
    if (dialect === 'postgres') {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        for (const statement of statements) results.push((await client.query(statement)).rows)
      } finally {
        await client.end()
      }
    } else {
      const connection = await mysql.createConnection(url)
      try {
        for (const statement of statements) {
          results.push((await connection.query(statement))[0] as unknown[])
        }
      } finally {
        await connection.end()
      }
    }
    return results
  }

  const drop = async () => {
    for (const server of SERVERS) {
      await run(undefined, [
        `DROP DATABASE IF EXISTS ${databaseOf(server)}${dialect === 'postgres' ? ' WITH (FORCE)' : ''}`,
      ])
    }
  }
  await drop()
  for (const server of SERVERS) {
    await run(undefined, [`CREATE DATABASE ${databaseOf(server)}`])
    // The client's work is compared: a commit does not wait for the disk (on a machine whose disk
    // flushes slowly that wait would be most of a single-row write's time).
    if (dialect === 'postgres') {
      await run(undefined, [`ALTER DATABASE ${databaseOf(server)} SET synchronous_commit = off`])
    }
    await run(
      server,
      dialect === 'postgres'
        ? [
            'CREATE TABLE keyed (id BIGINT PRIMARY KEY, shard_key TEXT NOT NULL)',
            'CREATE TABLE insert_statements (n INT NOT NULL)',
            `CREATE FUNCTION count_insert_statement() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN INSERT INTO insert_statements VALUES (1); RETURN NULL; END $$`,
            'CREATE TRIGGER keyed_insert_statements AFTER INSERT ON keyed FOR EACH STATEMENT EXECUTE FUNCTION count_insert_statement()',
          ]
        : ['CREATE TABLE keyed (id BIGINT PRIMARY KEY, shard_key VARCHAR(20) NOT NULL)'],
    )
  }
  const urls = Object.fromEntries(
    SERVERS.map((server) => [server, urlOf(server)]),
  ) as PerServer<string>

  /** One count per server, read on connections of its own (not the ORMs'). */
  const countEach = async (query: string) =>
    Object.fromEntries(
      await Promise.all(
        SERVERS.map(async (server) => {
          const [rows] = await run(server, [query])
          return [server, Number(Object.values(rows![0] as object)[0])]
        }),
      ),
    ) as PerServer<number>

  const sent = { a: 0, b: 0, c: 0 }
  let compared = false
  const keyOfShard = keysOfShards(sharding)
  const diff = (after: PerServer<number>, before: PerServer<number>) =>
    Object.fromEntries(SERVERS.map((s) => [s, after[s] - before[s]])) as PerServer<number>

  const bench: RoutedBench<K> = {
    json,
    rounds,
    dialect,
    sharding,
    source,
    map,
    urls,
    sent,
    log,
    countSent: (server) => () => {
      sent[server]++
    },
    rows(size, over = 'a') {
      const shards = over === 'all' ? 64 : RANGES.a[1] + 1
      return Array.from(
        { length: size },
        (_, i) => ({ [keyField]: keyOfShard[i % shards] }) as Record<K, string>,
      )
    },
    async statements(write, inserts) {
      if (!compared) {
        throw new Error(
          "statements() runs after compare(): its write would give the router's connections a history the direct side's do not have.",
        )
      }
      const countInserts = inserts ?? (() => countEach('SELECT count(*) FROM insert_statements'))
      const insertsBefore = await countInserts()
      const sentBefore = { ...sent }
      await write()
      const sentAfter = { ...sent }
      const counts = {
        inserts: diff(await countInserts(), insertsBefore),
        sent: diff(sentAfter, sentBefore),
        rows: await countEach('SELECT count(*) FROM keyed'),
      }
      log(
        `${dialect}: one 1000-row write over 3 servers: INSERT statements ${JSON.stringify(counts.inserts)}, statements sent ${JSON.stringify(counts.sent)}, rows ${JSON.stringify(counts.rows)}`,
      )
      return counts
    },
    async compare(sides) {
      compared = true
      return compare(
        sides,
        () => run('a', ['DELETE FROM keyed']),
        rounds,
        (line) => log(`${dialect}: ${line}`),
      )
    },
    chart: (overhead, label = options.adapter) => chartOf(overhead, label, loadavgStart),
    drop,
    async finish(results, close, output = {}) {
      await close()
      await source.close()
      await drop()
      const out = {
        adapter: options.adapter,
        keys: process.env.KEYS ?? 'digits',
        concurrency: CONCURRENCY,
        loadavgStart,
        ...results,
        loadavgEnd: loadavg(),
      }
      if (json && output.print !== false) console.log(JSON.stringify(out, null, 2))
      if (process.env.SLICES) await writeFile(process.env.SLICES, JSON.stringify(slices))
      const chart = 'chart' in output ? output.chart : chartPath
      if (chart) await writeFile(chart, `${JSON.stringify(bench.chart(results.overhead))}\n`)
      log(`${dialect}: load average at end ${out.loadavgEnd.map((n) => n.toFixed(1)).join(' ')}`)
      return out
    },
  }
  return bench
}

/**
 * A shard key for each of the 64 logical shards: '0' to '63' (read as integers), or with
 * KEYS=text the first 'tenant-N' that hashes to each shard.
 */
function keysOfShards(sharding: Sharding): string[] {
  const keys = Array.from({ length: sharding.logicalShards }, (_, shard) => String(shard))
  if ((process.env.KEYS ?? 'digits') === 'digits') return keys
  if (process.env.KEYS !== 'text')
    throw new Error(`KEYS is digits or text, got ${process.env.KEYS}.`)
  let found = 0
  for (let n = 0; found < keys.length; n++) {
    const key = `tenant-${n}`
    const shard = sharding.shardForKey(key)
    if (keys[shard] === String(shard)) {
      keys[shard] = key
      found++
    }
  }
  return keys
}

/**
 * The warm-up rounds before the timed ones of a shape (`rows` per write, `times` writes per
 * slice, four slices a round, two of each side): `WARMUP` (3), and as many more as give each side
 * `WARMUP_WRITES` writes, by default 4000 single-row writes and 1000 writes of 1000 rows. V8
 * optimizes a function after about 3000 calls (`--invocation-count-for-turbofan`), and the
 * router's own functions run once per write: after fewer single-row writes they still run
 * unoptimized in the timed rounds, measured as a short-lived process would run them, not as an
 * application does. Kysely on PostgreSQL counted 1.068 of the direct insert's instructions after
 * 2,400 warm-up writes of each side, its rounds still falling; 1.042 after 7,200.
 */
export function warmupRounds(
  rows: number,
  times: number,
  env: Record<string, string | undefined> = process.env,
): number {
  const writes = Number(env.WARMUP_WRITES ?? (rows === 1 ? 4000 : 1000))
  return Math.max(Number(env.WARMUP ?? 3), Math.ceil(writes / (2 * times)))
}

/** The shapes to run, by rows per write (SHAPES, `1,1000` by default). */
const SHAPES = process.env.SHAPES?.split(',')

/** Writes in flight at once in a slice (CONCURRENCY, 1 by default: one after another). */
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 1)
if (!Number.isInteger(CONCURRENCY) || CONCURRENCY < 1) {
  throw new Error(
    `CONCURRENCY is a whole number of writes in flight, got ${process.env.CONCURRENCY}.`,
  )
}

/** Wall time and this process's CPU time (user + system) of `times` runs, in ms. */
async function timed(
  run: () => Promise<unknown>,
  times: number,
  side: string,
  shape: string,
  round: number,
) {
  const from = process.hrtime.bigint()
  const thread = threadNs()
  const start = performance.now()
  const cpu = process.cpuUsage()
  if (CONCURRENCY === 1) {
    for (let i = 0; i < times; i++) await run()
  } else {
    // CONCURRENCY writers share the slice's writes; the pool queues what it cannot send yet.
    const writer = async (first: number) => {
      for (let i = first; i < times; i += CONCURRENCY) await run()
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, (_, first) => writer(first)))
  }
  const used = process.cpuUsage(cpu)
  const ms = performance.now() - start
  const cpuMs = (used.user + used.system) / 1000
  slices.push({
    side,
    shape,
    round,
    writes: times,
    from: Number(from / 1000n),
    to: Number(process.hrtime.bigint() / 1000n),
    cpuMs,
    userMs: used.user / 1000,
    systemMs: used.system / 1000,
    threadMs: (threadNs() - thread) / 1e6,
  })
  return { ms, cpu: cpuMs }
}

/** The CPU time of this thread (the main one) in ns, user and kernel, where Linux tells it. */
function threadNs(): number {
  if (!process.env.SLICES) return Number.NaN
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0])
  } catch {
    return Number.NaN
  }
}

/**
 * Every timed slice, in run order: its side, shape, round (negative in the warm-up), writes,
 * monotonic clock in µs (the clock of a `node --cpu-prof` profile's samples), the process's CPU ms
 * (and its user and kernel parts) and the main thread's (Linux), written to SLICES (a file) at
 * `finish`: a profile of a run split by side, the main thread against the others; the slices
 * `instructions.ts` counts.
 */
export interface Slice {
  side: string
  shape: string
  round: number
  writes: number
  from: number
  to: number
  cpuMs: number
  /** Of `cpuMs`, the time in user space and in the kernel (page faults, system calls). */
  userMs: number
  systemMs: number
  threadMs: number
}
const slices: Slice[] = []

const spreadOf = (values: number[]): Spread => ({
  median: median(values),
  min: Math.min(...values),
  max: Math.max(...values),
})

async function compare(
  sides: Sides,
  reset: () => Promise<unknown>,
  rounds: number,
  log: (line: string) => void,
): Promise<Record<string, ShapeResult>> {
  const shapes = [
    { name: '1 row', rows: 1, times: Number(process.env.SINGLE_TIMES ?? 3000) },
    { name: '1000 rows', rows: 1000, times: Number(process.env.BATCH_TIMES ?? 50) },
  ].filter((shape) => SHAPES === undefined || SHAPES.includes(String(shape.rows)))
  const out: Record<string, ShapeResult> = {}
  for (const shape of shapes) {
    const perRound = {
      routerMs: [] as number[],
      directMs: [] as number[],
      routerCpuMs: [] as number[],
      directCpuMs: [] as number[],
    }
    const only = process.env.ONLY as keyof Sides | undefined
    const router = () => sides[only ?? 'router'](shape.rows)
    const direct = () => sides[only ?? 'direct'](shape.rows)
    // Rounds, and writes: the router's code runs once per write, much of an ORM's once per row,
    // so with large writes V8 optimizes the router's last. Kysely on PostgreSQL, 1000 rows: 0.98
    // to 1.31 of the direct write in the first eight rounds of 100 writes a side, then 0.93-1.04.
    const warmup = warmupRounds(shape.rows, shape.times)
    for (let round = -warmup; round < rounds; round++) {
      // A-B-B-A: each side runs first and last once per round, the first side alternating.
      const routerFirst = Math.abs(round) % 2 === 0
      const [first, second] = routerFirst ? [router, direct] : [direct, router]
      const [one, two] = routerFirst ? ['router', 'direct'] : ['direct', 'router']
      const t1 = await timed(first, shape.times, one, shape.name, round)
      const t2 = await timed(second, shape.times, two, shape.name, round)
      const t3 = await timed(second, shape.times, two, shape.name, round)
      const t4 = await timed(first, shape.times, one, shape.name, round)
      await reset()
      if (round < 0) continue // warm-up
      const outer = { ms: t1.ms + t4.ms, cpu: t1.cpu + t4.cpu }
      const inner = { ms: t2.ms + t3.ms, cpu: t2.cpu + t3.cpu }
      const [r, d] = routerFirst ? [outer, inner] : [inner, outer]
      const writes = 2 * shape.times
      perRound.routerMs.push(r.ms / writes)
      perRound.directMs.push(d.ms / writes)
      perRound.routerCpuMs.push(r.cpu / writes)
      perRound.directCpuMs.push(d.cpu / writes)
    }
    const ratios = (a: number[], b: number[]) => a.map((value, i) => value / b[i]!)
    const result: ShapeResult = {
      rounds,
      warmupRounds: warmup,
      writesPerSlice: shape.times,
      wall: spreadOf(ratios(perRound.routerMs, perRound.directMs)),
      cpu: spreadOf(ratios(perRound.routerCpuMs, perRound.directCpuMs)),
      msPerWrite: { router: median(perRound.routerMs), direct: median(perRound.directMs) },
      perRound,
    }
    out[shape.name] = result
    const f = (spread: Spread) =>
      `${spread.median.toFixed(3)} (${spread.min.toFixed(3)}..${spread.max.toFixed(3)})`
    log(
      `${shape.name}: router / direct client CPU ${f(result.cpu)}, wall ${f(result.wall)}; median ms per write: router ${result.msPerWrite.router.toFixed(2)}, direct ${result.msPerWrite.direct.toFixed(2)}`,
    )
  }
  return out
}

/** One panel per shape and time (client CPU, wall): router ÷ one server, round by round. */
function chartOf(
  overhead: Record<string, ShapeResult>,
  label: string,
  load: number[],
): BenchResults {
  const rows: BenchResults['rows'] = []
  let rounds = 0
  for (const [shape, result] of Object.entries(overhead)) {
    rounds = result.rounds
    const { perRound } = result
    for (const [time, router, direct] of [
      ['client CPU', perRound.routerCpuMs, perRound.directCpuMs],
      ['wall', perRound.routerMs, perRound.directMs],
    ] as const) {
      const group = `${shape}, ${time}`
      rows.push({ label: 'baseline', group, values: direct.map(positive) })
      rows.push({ label: 'router', group, values: router.map(positive) })
    }
  }
  return {
    title: `${label}: a write through the router ÷ the same write on one server`,
    unit: 'ms per write',
    note: [
      `${rounds} rounds of A-B-B-A slices; baseline: the same write on server a, not routed`,
      `load average ${load.map((n) => n.toFixed(0)).join(' ')} at the start, on 2 shared cores`,
    ],
    baseline: 'baseline',
    rows,
  }
}

/** A chart value is positive: a slice too short for the CPU clock counts as one microsecond. */
const positive = (value: number) => Math.max(value, 0.001)
