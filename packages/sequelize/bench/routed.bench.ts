/**
 * What routing by `shardedSequelize()` costs, Sequelize 6 on PostgreSQL (after
 * `pnpm --filter @shardflake/sequelize build`):
 *
 *   node bench/routed.bench.ts [--json]     (ROUNDS=11, DB_PREFIX=sf_bench_routed_sequelize_)
 *
 * Three databases of one PostgreSQL server (PG_URL, default
 * postgres://postgres@127.0.0.1:5432/test) play servers a, b and c (logical shards 0-20, 21-41,
 * 42-63 of 64), each with a `Sequelize` and `shardedIds()`; they are dropped at the end.
 *
 * 1. Statements: one `sharded.bulkCreate('Keyed', rows)` of 1000 rows over the 64 shards. Each
 *    database counts the INSERT statements on `keyed` with a statement-level trigger; the
 *    statements Sequelize sent each server are counted by its `logging` function.
 * 2. Overhead: the same `bulkCreate` of rows of server a's shards through the router and through
 *    a `Sequelize` on server a's database that is not routed (same source, same model), in rounds
 *    of A-B-B-A slices of back-to-back writes (which side goes first alternates). Ratio = router
 *    time / direct time per round (above 1: the router is slower): median over the rounds after
 *    a warm-up, with the smallest and largest round; the same for this process's CPU time.
 */
import { loadavg } from 'node:os'
import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
import { shardedId, shardedIds, shardedSequelize } from '@shardflake/sequelize'
import pg from 'pg'
import { DataTypes, type ModelStatic, Sequelize } from 'sequelize'

const json = process.argv.includes('--json')
const rounds = Number(process.env.ROUNDS ?? 11)
const base = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const prefix = process.env.DB_PREFIX ?? 'sf_bench_routed_sequelize_'
if (!/^[a-z_][a-z0-9_]{0,40}$/.test(prefix))
  throw new Error(`DB_PREFIX: not a safe name: ${prefix}`)
const NAMES = ['a', 'b', 'c'] as const
const log = (line: string) => {
  if (!json) console.log(line)
}

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const source = new InProcessSource({ sharding, shards: 'all' })
const map = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])

const loadavgStart = loadavg()
log(`load average at start: ${loadavgStart.map((n) => n.toFixed(1)).join(' ')}`)
const urls = await createDatabases()
const sentCounts: Record<string, number> = {}
const servers: Record<string, Sequelize> = {}
for (const name of NAMES) {
  sentCounts[name] = 0
  servers[name] = open(urls[name]!, () => {
    sentCounts[name]!++
  })
}
// Server a's database through a Sequelize that is not routed, logging the same way.
const direct = open(urls.a!, () => {})
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedSequelize(homes)

function open(url: string, logging: (sql: string) => void): Sequelize {
  const sequelize = new Sequelize(url, { logging, pool: { max: 2 } })
  shardedIds(sequelize, { source })
  sequelize.define(
    'Keyed',
    {
      id: shardedId({ shardBy: 'shardKey' }),
      shardKey: { type: DataTypes.TEXT, allowNull: false },
    },
    { tableName: 'keyed', timestamps: false, underscored: true },
  )
  return sequelize
}

// 1. One 1000-row bulkCreate over three servers.
const spread = Array.from({ length: 1000 }, (_, i) => ({ shardKey: String(i % 64) }))
const statementsBefore = await insertStatements()
const sentBefore = NAMES.map((name) => sentCounts[name]!)
await sharded.bulkCreate('Keyed', spread)
// (Read before the counters below: they are read through the same ORMs.)
const sent = Object.fromEntries(NAMES.map((name, i) => [name, sentCounts[name]! - sentBefore[i]!]))
const statementsAfter = await insertStatements()
const statements = Object.fromEntries(
  NAMES.map((name, i) => [name, statementsAfter[i]! - statementsBefore[i]!]),
)
const rowsOn = Object.fromEntries(
  await Promise.all(
    NAMES.map(async (name) => [name, await count(servers[name]!, 'SELECT count(*) FROM keyed')]),
  ),
)
log(
  `one 1000-row bulkCreate over 3 servers: INSERT statements ${JSON.stringify(statements)}, statements sent ${JSON.stringify(sent)}, rows ${JSON.stringify(rowsOn)}`,
)

// 2. Router against the same write on one server that is not routed.
const rowsOf = (size: number) =>
  Array.from({ length: size }, (_, i) => ({ shardKey: String(i % 21) }))
const DirectKeyed = direct.model('Keyed') as ModelStatic<never>
const overhead = await compare({
  router: (size) => sharded.bulkCreate('Keyed', rowsOf(size)),
  direct: (size) => DirectKeyed.bulkCreate(rowsOf(size) as never[]),
  reset: () => direct.query('DELETE FROM keyed'),
})

const results = { loadavgStart, statements, sent, rowsOn, overhead, loadavgEnd: loadavg() }
if (json) console.log(JSON.stringify(results, null, 2))
await homes.close()
for (const made of [...Object.values(servers), direct]) await made.close()
await source.close()
await dropDatabases()

// --- the harness shared by the routed benchmarks of the adapters (same shape in each) ---

async function admin(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: base })
  await client.connect()
  try {
    await client.query(statement)
  } finally {
    await client.end()
  }
}

async function count(sequelize: Sequelize, query: string): Promise<number> {
  const [rows] = (await sequelize.query(query)) as [{ count: string }[], unknown]
  return Number(rows[0]!.count)
}

async function insertStatements(): Promise<number[]> {
  return Promise.all(
    NAMES.map((name) => count(servers[name]!, 'SELECT count(*) FROM insert_statements')),
  )
}

/** Creates (afresh) the three databases with `keyed` and its statement counter. */
async function createDatabases(): Promise<Record<string, string>> {
  const made: Record<string, string> = {}
  for (const name of NAMES) {
    const database = `${prefix}${name}`
    await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    await admin(`CREATE DATABASE ${database}`)
    const url = new URL(base)
    url.pathname = `/${database}`
    made[name] = url.toString()
    const client = new pg.Client({ connectionString: made[name] })
    await client.connect()
    for (const statement of [
      'CREATE TABLE keyed (id BIGINT PRIMARY KEY, shard_key TEXT NOT NULL)',
      'CREATE TABLE insert_statements (n INT NOT NULL)',
      `CREATE FUNCTION count_insert_statement() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN INSERT INTO insert_statements VALUES (1); RETURN NULL; END $$`,
      'CREATE TRIGGER keyed_insert_statements AFTER INSERT ON keyed FOR EACH STATEMENT EXECUTE FUNCTION count_insert_statement()',
    ]) {
      await client.query(statement)
    }
    await client.end()
  }
  return made
}

async function dropDatabases(): Promise<void> {
  for (const name of NAMES) await admin(`DROP DATABASE IF EXISTS ${prefix}${name} WITH (FORCE)`)
}

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Wall time and this process's CPU time (user + system) of `times` runs, in ms. */
async function timed(run: () => Promise<unknown>, times: number) {
  const start = performance.now()
  const cpu = process.cpuUsage()
  for (let i = 0; i < times; i++) await run()
  const used = process.cpuUsage(cpu)
  return { ms: performance.now() - start, cpu: (used.user + used.system) / 1000 }
}

/** Router against direct, single rows and 1000 rows, A-B-B-A per round, a warm-up round. */
async function compare(sides: {
  router: (size: number) => Promise<unknown>
  direct: (size: number) => Promise<unknown>
  reset: () => Promise<unknown>
}) {
  const shapes = [
    { name: '1 row', rows: 1, times: Number(process.env.SINGLE_TIMES ?? 100) },
    { name: '1000 rows', rows: 1000, times: Number(process.env.BATCH_TIMES ?? 3) },
  ]
  const out: Record<string, unknown> = {}
  for (const shape of shapes) {
    const wall: number[] = []
    const cpu: number[] = []
    const ms = { router: [] as number[], direct: [] as number[] }
    for (let round = -1; round < rounds; round++) {
      const router = () => sides.router(shape.rows)
      const plain = () => sides.direct(shape.rows)
      const [first, second] = round % 2 === 0 ? [router, plain] : [plain, router]
      const t1 = await timed(first, shape.times)
      const t2 = await timed(second, shape.times)
      const t3 = await timed(second, shape.times)
      const t4 = await timed(first, shape.times)
      const outer = { ms: t1.ms + t4.ms, cpu: t1.cpu + t4.cpu }
      const inner = { ms: t2.ms + t3.ms, cpu: t2.cpu + t3.cpu }
      const [r, d] = first === router ? [outer, inner] : [inner, outer]
      await sides.reset()
      if (round < 0) continue // warm-up
      wall.push(r.ms / d.ms)
      cpu.push(r.cpu / d.cpu)
      ms.router.push(r.ms / (2 * shape.times))
      ms.direct.push(d.ms / (2 * shape.times))
    }
    const summary = {
      rounds,
      savesPerSlice: shape.times,
      wall: { median: median(wall), min: Math.min(...wall), max: Math.max(...wall) },
      cpu: { median: median(cpu), min: Math.min(...cpu), max: Math.max(...cpu) },
      msPerSave: { router: median(ms.router), direct: median(ms.direct) },
    }
    out[shape.name] = summary
    const f = (n: number) => n.toFixed(3)
    log(
      `${shape.name}: router / direct wall ${f(summary.wall.median)} (${f(summary.wall.min)}..${f(summary.wall.max)}), client CPU ${f(summary.cpu.median)} (${f(summary.cpu.min)}..${f(summary.cpu.max)}); median ms per save: router ${summary.msPerSave.router.toFixed(2)}, direct ${summary.msPerSave.direct.toFixed(2)}`,
    )
  }
  return out
}
