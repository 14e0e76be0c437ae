/**
 * What routing by `shardedDatabases()` costs, on PostgreSQL with Drizzle 0.45: three databases of
 * the test server stand in for three servers a, b, c (shards 0-20, 21-41, 42-63 of 64).
 *
 * 1. One `sharded.insert(posts, rows)` of 1000 rows spread over the three: how many INSERT
 *    statements each database ran, counted by a statement-level trigger in the database itself.
 * 2. The router's overhead: the same write (rows of shards on server a, given their IDs by
 *    `ids.assign`) through `sharded.insert(posts, rows)`, and directly as
 *    `db.insert(posts).values(await ids.assign(posts, rows))` on a Drizzle database of server a
 *    that is not routed. Rounds alternate which goes first; each round times `--inserts` INSERTs
 *    of `--size` rows per mode; the ratio is the median of the per-round ratios (router time ÷
 *    direct time), with the smallest and largest in brackets.
 * 3. The same two writes built (`toSQL()`) but not sent: the router's work in the process alone.
 *
 *   node bench/routed.ts [--rounds=11] [--sizes=1,1000] [--json=results/routed-0.45.json]
 *   (after `pnpm --filter @shardflake/drizzle build`; PG_URL elsewhere than
 *   postgres://postgres@127.0.0.1:5432/test)
 */
import { writeFileSync } from 'node:fs'
import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
import { shardedDatabases, shardedId, shardedIds } from '@shardflake/drizzle'
import { drizzle } from 'drizzle-orm/node-postgres'
import { bigint, pgTable, text } from 'drizzle-orm/pg-core'
import pg from 'pg'

const args = new Map(
  process.argv.slice(2).map((arg) => {
    const [key, value] = arg.replace(/^--/, '').split('=')
    return [key!, value ?? 'true'] as const
  }),
)
const rounds = Number(args.get('rounds') ?? 11)
const sizes = (args.get('sizes') ?? '1,1000').split(',').map(Number)
const jsonOut = args.get('json')
const base = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const urlOf = (database: string) => {
  const url = new URL(base)
  url.pathname = `/${database}`
  return url.toString()
}
const SERVERS = ['a', 'b', 'c'] as const
const databaseOf = (server: string) => `sf_drz_routed_bench_${server}`

const posts = pgTable('posts', {
  id: shardedId(bigint({ mode: 'bigint' }), { shardBy: 'tenantId' }).primaryKey(),
  tenantId: bigint('tenant_id', { mode: 'bigint' }).notNull(),
  title: text().notNull(),
})

async function admin(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: base })
  await client.connect()
  try {
    await client.query(statement)
  } finally {
    await client.end()
  }
}

const pools: pg.Pool[] = []
function pool(server: string): pg.Pool {
  const made = new pg.Pool({ connectionString: urlOf(databaseOf(server)), max: 2 })
  pools.push(made)
  return made
}

for (const server of SERVERS) {
  await admin(`DROP DATABASE IF EXISTS ${databaseOf(server)} WITH (FORCE)`)
  await admin(`CREATE DATABASE ${databaseOf(server)}`)
  const setup = pool(server)
  for (const statement of [
    'CREATE TABLE posts (id BIGINT PRIMARY KEY, tenant_id BIGINT NOT NULL, title TEXT NOT NULL)',
    'CREATE TABLE insert_statements (n BIGINT NOT NULL)',
    `CREATE FUNCTION count_insert_statement() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN INSERT INTO insert_statements VALUES (1); RETURN NULL; END $$`,
    'CREATE TRIGGER posts_insert_statements AFTER INSERT ON posts FOR EACH STATEMENT EXECUTE FUNCTION count_insert_statement()',
  ]) {
    await setup.query(statement)
  }
}

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const source = new InProcessSource({ sharding, shards: 'all' })
const dbs = Object.fromEntries(SERVERS.map((server) => [server, drizzle({ client: pool(server) })]))
const direct = drizzle({ client: pool('a') }) // server a, not routed
const ids = shardedIds(dbs.a!, { source, schema: { posts } })
const homes = await ShardHomes.open({
  sharding,
  servers: dbs,
  directory: new ShardMap(sharding, [
    { from: 0, to: 20, target: 'a' },
    { from: 21, to: 41, target: 'b' },
    { from: 42, to: 63, target: 'c' },
  ]),
})
const sharded = shardedDatabases(homes, ids)

async function statementCounts(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {}
  for (const server of SERVERS) {
    const { rows } = await pools[SERVERS.indexOf(server)]!.query(
      'SELECT count(*)::int AS n FROM insert_statements',
    )
    counts[server] = (rows[0] as { n: number }).n
  }
  return counts
}

// 1. A 1000-row insert spread over the three servers.
const before = await statementCounts()
const spread = Array.from({ length: 1000 }, (_, i) => ({
  tenantId: BigInt(i % 64),
  title: `spread ${i}`,
}))
await sharded.insert(posts, spread)
const after = await statementCounts()
const statements = Object.fromEntries(SERVERS.map((s) => [s, after[s]! - before[s]!]))
const rowsPerServer = Object.fromEntries(
  SERVERS.map((s) => [
    s,
    spread.filter((row) => homes.serverOf(sharding.shardOfId(row.id!)) === s).length,
  ]),
)
console.log(
  '1000 rows over three servers: INSERT statements per server',
  statements,
  'rows',
  rowsPerServer,
)

// 2. The router against the same write straight on server a.
const median = (values: number[]) => {
  const sorted = [...values].sort((x, y) => x - y)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
let serial = 0
const rowsOf = (size: number) =>
  Array.from({ length: size }, () => ({ tenantId: BigInt(serial++ % 21), title: 'bench' }))

const modes = {
  router: async (size: number) => {
    await sharded.insert(posts, rowsOf(size))
  },
  direct: async (size: number) => {
    await direct.insert(posts).values(await ids.assign(posts, rowsOf(size)))
  },
}

const results: Record<string, unknown>[] = []
for (const size of sizes) {
  const inserts = Number(args.get('inserts') ?? (size === 1 ? 300 : 5))
  const ratios: number[] = []
  const times: Record<string, number[]> = { router: [], direct: [] }
  for (let round = -1; round < rounds; round++) {
    const order =
      (round & 1) === 0 ? (['router', 'direct'] as const) : (['direct', 'router'] as const)
    const took: Record<string, number> = {}
    for (const mode of order) {
      const started = performance.now()
      for (let i = 0; i < inserts; i++) await modes[mode](size)
      took[mode] = performance.now() - started
    }
    if (round < 0) continue // warm-up
    times.router!.push(took.router!)
    times.direct!.push(took.direct!)
    ratios.push(took.router! / took.direct!)
  }
  const result = {
    size,
    inserts,
    rounds,
    routerMsPerInsert: median(times.router!) / inserts,
    directMsPerInsert: median(times.direct!) / inserts,
    ratio: median(ratios),
    ratioMin: Math.min(...ratios),
    ratioMax: Math.max(...ratios),
  }
  results.push(result)
  console.log(
    `${size}-row INSERTs on one server: router ÷ direct = ${result.ratio.toFixed(3)} [${result.ratioMin.toFixed(3)}-${result.ratioMax.toFixed(3)}] (median ms per INSERT: router ${result.routerMsPerInsert.toFixed(2)}, direct ${result.directMsPerInsert.toFixed(2)})`,
  )
}

// 3. The same, without the database: what the router adds in the process (placing the rows by
// server, checking each row's home while Drizzle builds the INSERT), against building the same
// INSERT on a database that is not routed. IDs are assigned in both.
const cpu: Record<string, unknown>[] = []
for (const size of sizes) {
  const builds = size === 1 ? 2000 : 20
  const ratios: number[] = []
  const build = {
    router: async () => {
      const rows = await ids.assign(posts, rowsOf(size))
      const groups = await homes.writeGroups(rows, (row) => sharding.shardOfId(row.id!))
      for (const { handle, items } of groups.values()) handle.insert(posts).values(items).toSQL()
    },
    direct: async () => {
      direct
        .insert(posts)
        .values(await ids.assign(posts, rowsOf(size)))
        .toSQL()
    },
  }
  for (let round = -1; round < rounds; round++) {
    const order =
      (round & 1) === 0 ? (['router', 'direct'] as const) : (['direct', 'router'] as const)
    const took: Record<string, number> = {}
    for (const mode of order) {
      const started = performance.now()
      for (let i = 0; i < builds; i++) await build[mode]()
      took[mode] = performance.now() - started
    }
    if (round >= 0) ratios.push(took.router! / took.direct!)
  }
  const result = {
    size,
    builds,
    ratio: median(ratios),
    ratioMin: Math.min(...ratios),
    ratioMax: Math.max(...ratios),
  }
  cpu.push(result)
  console.log(
    `${size}-row INSERTs built, not sent: router ÷ direct = ${result.ratio.toFixed(3)} [${result.ratioMin.toFixed(3)}-${result.ratioMax.toFixed(3)}]`,
  )
}

if (jsonOut) {
  writeFileSync(
    new URL(jsonOut, new URL('./', import.meta.url)),
    `${JSON.stringify({ date: new Date().toISOString(), statements, rowsPerServer, results, cpu }, null, 2)}\n`,
  )
}

ids.close()
await homes.close()
await source.close()
for (const made of pools) await made.end()
for (const server of SERVERS)
  await admin(`DROP DATABASE IF EXISTS ${databaseOf(server)} WITH (FORCE)`)
