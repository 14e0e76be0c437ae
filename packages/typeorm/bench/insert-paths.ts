/**
 * Where a 1000-row insert's time goes, layer by layer: the driver alone, TypeORM with keys the
 * application made, and the `@ShardedId` subscriber, each against the same layer with a
 * database-generated key (AUTO_INCREMENT, an identity column on PostgreSQL).
 *
 *   pnpm --filter @shardflake/typeorm build
 *   node packages/typeorm/bench/insert-paths.ts [--db mysql|postgres] [--rounds 7] [--batches 5]
 *     [--variants raw-auto,raw-given,auto,given,...]
 *
 * Variants (each its own table of the same shape: BIGINT key, BIGINT user, a title):
 * - `raw-auto` / `raw-given`: one multi-row `INSERT` through the driver (mysql2 or pg), `DEFAULT`
 *   keys (with `RETURNING id` on PostgreSQL, as TypeORM sends) against keys made beforehand;
 * - `auto` / `given` / `sharded`: `repository.save(rows)`, the database's key, keys made beforehand
 *   (decimal strings, no subscriber), and the subscriber with the in-process source;
 * - `raw-given-bigint`, `given-bigint`: the keys as `bigint` values (mysql2 writes them unquoted);
 * - `sharded-bigint`: `shardedIds(dataSource, { source, idType: 'bigint' })`;
 * - `auto-insert` / `given-insert` / `sharded-insert`: `repository.insert(rows)` instead of `save()`;
 * - `auto-noreload` / `given-noreload` / `sharded-noreload`: `save(rows, { reload: false })`;
 * - `auto-chunk` / `sharded-chunk`: `save(rows, { chunk: --chunk })`, one INSERT per chunk;
 * - `sharded-db` / `sharded-dbinsert`: `save()` / `insert()` with the database's source
 *   (`MysqlSource` / `PostgresSource`, installed in the bench database) and
 *   `prefetch: { size: --prefetch }`: IDs served from memory, one round trip per shard when a
 *   shard's buffer runs out.
 *
 * Each round empties every table and makes `--batches` calls of `--rows` rows into each, the
 * variants taking turns call by call (which goes first rotates). Per variant and round: rows/s of
 * wall time in its own calls, this process's CPU time per row (`process.cpuUsage`), and on
 * PostgreSQL the server CPU time per row of the variant's backend (`/proc/<pid>/schedstat`: the
 * bench must run on the database's machine). Every connection pool has one connection. Ratios are
 * per round against `auto` (or `raw-auto` for `raw-given`); the report gives medians and the
 * smallest and largest round's ratio.
 */
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { allocateAscending, defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { createMysqlPool, installMysql, MysqlSource } from '@shardflake/mysql'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import { shardedIdColumn, shardedIds } from '@shardflake/typeorm'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { DataSource, EntitySchema } from 'typeorm'

interface PostRow {
  id?: string | bigint
  userId: string
  title: string
}

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: 'mysql' },
    rounds: { type: 'string', default: '7' },
    batches: { type: 'string', default: '5' },
    rows: { type: 'string', default: '1000' },
    variants: {
      type: 'string',
      default:
        'raw-auto,raw-given,raw-given-bigint,auto,given,sharded,sharded-bigint,auto-insert,given-insert,sharded-insert,auto-noreload,sharded-noreload',
    },
    database: { type: 'string', default: 'shardflake_typeorm_insert_paths' },
    json: { type: 'string' },
    /** Rows per INSERT for the `-chunk` variants (`save(rows, { chunk })`). */
    chunk: { type: 'string', default: '500' },
    /** IDs per round trip per shard for the `-db` variants. */
    prefetch: { type: 'string', default: '1000' },
  },
})
const db = args.db === 'postgres' ? 'postgres' : 'mysql'
const rounds = Number(args.rounds)
const batches = Number(args.batches)
const rowsPerCall = Number(args.rows)
const names = args.variants.split(',')
const chunk = Number(args.chunk)
const sharding = defineSharding({ layout: instagram, logicalShards: 16 })
const source = new InProcessSource({ sharding, shards: 'all' })

const url = new URL(
  db === 'mysql'
    ? (process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
    : (process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'),
)
type Query = (sql: string, params?: unknown[]) => Promise<unknown>
async function connect(on: URL): Promise<{ query: Query; end: () => Promise<void> }> {
  if (db === 'mysql') {
    const connection = await mysql.createConnection({ uri: on.toString() })
    return { query: (sql, params) => connection.query(sql, params), end: () => connection.end() }
  }
  const client = new pg.Client({ connectionString: on.toString() })
  await client.connect()
  return { query: (sql, params) => client.query(sql, params), end: () => client.end() }
}
const admin = await connect(url)
await admin.query(`DROP DATABASE IF EXISTS ${args.database}`)
await admin.query(`CREATE DATABASE ${args.database}`)
const dbUrl = new URL(url)
dbUrl.pathname = `/${args.database}`

/** The database's source with a prefetch buffer, installed on first use (`-db` variants). */
let databaseSource: MysqlSource | PostgresSource | undefined
let sourcePool: { end(): Promise<void> } | undefined
async function dbSource(): Promise<MysqlSource | PostgresSource> {
  if (databaseSource) return databaseSource
  const prefetch = { size: Number(args.prefetch) }
  if (db === 'mysql') {
    const pool = await createMysqlPool({ uri: dbUrl.toString(), connectionLimit: 2 })
    const schemaPrefix = `${args.database}_s`
    await installMysql(pool, { sharding, shards: 'all', schemaPrefix })
    sourcePool = pool
    databaseSource = new MysqlSource({ sharding, databases: pool, schemaPrefix, prefetch })
  } else {
    const pool = new pg.Pool({ connectionString: dbUrl.toString(), max: 2 })
    await installPostgres(pool, { sharding, shards: 'all' })
    sourcePool = pool
    databaseSource = new PostgresSource({ sharding, databases: pool, prefetch })
  }
  return databaseSource
}

// An identity column on PostgreSQL: TypeORM takes it, its EntitySchema type does not list it.
const autoKey = (db === 'mysql' ? 'increment' : 'identity') as 'increment'
function schema(name: string, keyed: 'auto' | 'given' | 'sharded'): EntitySchema<PostRow> {
  return new EntitySchema<PostRow>({
    name: `Paths_${name.replaceAll('-', '_')}`,
    tableName: `paths_${name.replaceAll('-', '_')}`,
    columns: {
      id:
        keyed === 'sharded'
          ? shardedIdColumn<PostRow>({ shardBy: 'userId' })
          : keyed === 'auto'
            ? { type: 'bigint', primary: true, generated: autoKey }
            : { type: 'bigint', primary: true },
      userId: { type: 'bigint', name: 'user_id' },
      title: { type: 'varchar', length: 200 },
    },
  })
}

interface Variant {
  name: string
  table: string
  /** Inserts the rows; resolves when the database has them. */
  run: (rows: PostRow[]) => Promise<void>
  /** The connection's server process (PostgreSQL), for its CPU time. */
  pid?: number
  query: Query
  close: () => Promise<void>
}

async function rawVariant(name: string): Promise<Variant> {
  const table = name.replaceAll('-', '_')
  const conn = await connect(dbUrl)
  const key =
    name !== 'raw-auto'
      ? 'BIGINT NOT NULL'
      : db === 'mysql'
        ? 'BIGINT NOT NULL AUTO_INCREMENT'
        : 'BIGINT GENERATED BY DEFAULT AS IDENTITY'
  await conn.query(
    `CREATE TABLE ${table} (id ${key} PRIMARY KEY, user_id BIGINT NOT NULL, title VARCHAR(200) NOT NULL)`,
  )
  const withId = name !== 'raw-auto'
  const pid =
    db === 'postgres'
      ? Number(
          ((await conn.query('SELECT pg_backend_pid() AS pid')) as { rows: { pid: number }[] })
            .rows[0]!.pid,
        )
      : undefined
  return {
    name,
    table,
    pid,
    query: conn.query,
    close: conn.end,
    run: async (rows) => {
      let n = 0
      const p = () => (db === 'mysql' ? '?' : `$${++n}`)
      const params: unknown[] = []
      const tuples = rows.map((row) => {
        if (withId) params.push(row.id)
        params.push(row.userId, row.title)
        return withId ? `(${p()}, ${p()}, ${p()})` : `(DEFAULT, ${p()}, ${p()})`
      })
      const returning = db === 'postgres' && !withId ? ' RETURNING id' : ''
      await conn.query(
        `INSERT INTO ${table} (id, user_id, title) VALUES ${tuples.join(', ')}${returning}`,
        params,
      )
    },
  }
}

async function ormVariant(name: string): Promise<Variant> {
  const [keyed, how = 'save'] = name.split('-') as ['auto' | 'given' | 'sharded', string]
  const entity = schema(name, keyed)
  const dataSource = new DataSource({
    type: db === 'mysql' ? 'mariadb' : 'postgres',
    url: dbUrl.toString(),
    entities: [entity],
    synchronize: true,
    logging: false,
    extra: db === 'mysql' ? { connectionLimit: 1 } : { max: 1 },
  })
  if (keyed === 'sharded') {
    shardedIds(dataSource, {
      source: how.startsWith('db') ? await dbSource() : source,
      idType: how === 'bigint' ? 'bigint' : 'string',
    })
  }
  await dataSource.initialize()
  const pid =
    db === 'postgres'
      ? Number((await dataSource.query('SELECT pg_backend_pid() AS pid'))[0].pid)
      : undefined
  const repository = dataSource.getRepository(entity)
  return {
    name,
    table: entity.options.tableName!,
    pid,
    query: (sql) => dataSource.query(sql),
    close: () => dataSource.destroy(),
    run: async (rows) => {
      if (how === 'insert' || how === 'dbinsert') await repository.insert(rows)
      else if (how === 'noreload') await repository.save(rows, { reload: false })
      else if (how === 'chunk') await repository.save(rows, { chunk: chunk })
      else await repository.save(rows)
    },
  }
}

const variants: Variant[] = []
for (const name of names) {
  variants.push(name.startsWith('raw-') ? await rawVariant(name) : await ormVariant(name))
}
const givesKeys = (name: string) => name.startsWith('given') || name.startsWith('raw-given')

const serverNs = (pid: number | undefined) =>
  pid === undefined ? 0 : Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0])

let seed = 12_345
const random = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
  return seed
}
type Sample = { rowsPerSecond: number; clientUsPerRow: number; serverUsPerRow: number }
const samples: Record<string, Sample[]> = Object.fromEntries(names.map((name) => [name, []]))
const loads: number[] = []
// One untimed round of one call each: connections, statements and the JIT warm up.
for (let round = -1; round < rounds; round++) {
  for (const variant of variants) await variant.query(`TRUNCATE TABLE ${variant.table}`)
  const spent = Object.fromEntries(names.map((name) => [name, { wall: 0, client: 0, server: 0 }]))
  for (let b = 0; b < (round < 0 ? 1 : batches); b++) {
    const rows = Array.from({ length: rowsPerCall }, (_, i) => ({
      userId: String(random() % 100_000),
      title: `post ${b * rowsPerCall + i} ${'x'.repeat(random() % 40)}`,
    }))
    const shift = (round * batches + b) % variants.length
    for (const variant of [...variants.slice(shift), ...variants.slice(0, shift)]) {
      const posts: PostRow[] = rows.map((row) => ({ ...row }))
      if (givesKeys(variant.name)) {
        // Made before the timed call, ascending when the source has room (as the subscriber does).
        const ids = allocateAscending(
          source,
          posts.map((post) => sharding.shardForKey(post.userId)),
        )
        const asBigint = variant.name.endsWith('-bigint')
        posts.forEach((post, i) => {
          post.id = asBigint ? ids[i]! : ids[i]!.toString()
        })
      }
      const server0 = serverNs(variant.pid)
      const cpu0 = process.cpuUsage()
      const wall0 = process.hrtime.bigint()
      await variant.run(posts)
      const wall = Number(process.hrtime.bigint() - wall0) / 1e9
      const cpu = process.cpuUsage(cpu0)
      const entry = spent[variant.name]!
      entry.wall += wall
      entry.client += cpu.user + cpu.system
      entry.server += (serverNs(variant.pid) - server0) / 1000
    }
  }
  if (round < 0) continue
  const total = batches * rowsPerCall
  for (const name of names) {
    const entry = spent[name]!
    samples[name]!.push({
      rowsPerSecond: total / entry.wall,
      clientUsPerRow: entry.client / total,
      serverUsPerRow: entry.server / total,
    })
  }
  loads.push(loadavg()[0]!)
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const spread = (values: number[]) => ({
  median: Number(median(values).toFixed(3)),
  min: Number(Math.min(...values).toFixed(3)),
  max: Number(Math.max(...values).toFixed(3)),
})
/** The same layer and call with the database's key: `given-insert` against `auto-insert`. */
const baselineOf = (name: string) => {
  if (name.startsWith('raw-')) return 'raw-auto'
  const how = name.split('-')[1]
  if (how === 'dbinsert') return 'auto-insert'
  return how === 'insert' || how === 'noreload' || how === 'chunk' ? `auto-${how}` : 'auto'
}
const report: Record<string, unknown> = {
  orm: 'typeorm',
  db,
  rounds,
  batches,
  rowsPerCall,
  loadAverage: { min: Math.min(...loads), max: Math.max(...loads) },
  variants: Object.fromEntries(
    names.map((name) => {
      const own = samples[name]!
      const base = samples[baselineOf(name)]
      const perRound = (pick: (s: Sample) => number, invert = false) =>
        base
          ? own.map((s, r) => (invert ? pick(base[r]!) / pick(s) : pick(s) / pick(base[r]!)))
          : []
      return [
        name,
        {
          rowsPerSecond: Math.round(median(own.map((s) => s.rowsPerSecond))),
          clientUsPerRow: Number(median(own.map((s) => s.clientUsPerRow)).toFixed(2)),
          serverUsPerRow: Number(median(own.map((s) => s.serverUsPerRow)).toFixed(2)),
          ...(base && name !== baselineOf(name)
            ? {
                baseline: baselineOf(name),
                ...(baselineOf(name) !== 'auto' && samples.auto && !name.startsWith('raw-')
                  ? {
                      speedRatioToSave: spread(
                        own.map((s, r) => s.rowsPerSecond / samples.auto![r]!.rowsPerSecond),
                      ),
                    }
                  : {}),
                speedRatio: spread(perRound((s) => s.rowsPerSecond)),
                clientCpuRatio: spread(perRound((s) => s.clientUsPerRow)),
                ...(db === 'postgres'
                  ? { serverCpuRatio: spread(perRound((s) => s.serverUsPerRow)) }
                  : {}),
                speedRatioRounds: perRound((s) => s.rowsPerSecond).map((r) => Number(r.toFixed(2))),
              }
            : {}),
        },
      ]
    }),
  ),
}
console.log(JSON.stringify(report, null, 2))
const fixed = (value: number) => value.toFixed(2)
for (const [name, value] of Object.entries(
  report.variants as Record<string, Record<string, never>>,
)) {
  const ratio = (r?: { median: number; min: number; max: number }) =>
    r ? `${fixed(r.median)} (${fixed(r.min)}..${fixed(r.max)})` : '-'
  console.log(
    [
      name.padEnd(16),
      String(value.rowsPerSecond).padStart(7),
      ratio(value.speedRatio).padEnd(18),
      `client ${value.clientUsPerRow} µs/row`,
      ratio(value.clientCpuRatio).padEnd(18),
      db === 'postgres'
        ? `server ${value.serverUsPerRow} µs/row ${ratio(value.serverCpuRatio)}`
        : '',
      value.speedRatioToSave ? `vs auto save() ${ratio(value.speedRatioToSave)}` : '',
    ].join('  '),
  )
}
if (args.json)
  (await import('node:fs')).writeFileSync(args.json, `${JSON.stringify(report, null, 2)}\n`)
for (const variant of variants) await variant.close()
source.close()
await databaseSource?.close()
await sourcePool?.end()
await admin.query(`DROP DATABASE IF EXISTS ${args.database}`)
if (databaseSource && db === 'mysql') {
  // installMysql made one schema per logical shard beside the bench database.
  for (let shard = 0; shard < sharding.logicalShards; shard++) {
    await admin.query(`DROP DATABASE IF EXISTS ${args.database}_s${shard}`)
  }
}
await admin.end()
