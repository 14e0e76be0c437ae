/**
 * `pnpm --filter @shardflake/mysql bench:explicit` : where the cost of a 1000-row INSERT that
 * carries its own keys goes, against AUTO_INCREMENT in the same run, on two table shapes, with
 * the server's own counters (MYSQL_URL, default mysql://root@127.0.0.1:3306/test).
 *
 * Shapes (SHAPES=kv,kvr,posts):
 * - `kv`: `(id BIGINT PRIMARY KEY, payload INT)`, the `bench:insert` table, one shard, every row
 *   `payload = 1` (the baseline's statement is one constant string);
 * - `kvr`: the same table, each row's payload a different number rendered per statement, as an
 *   application's rows are (the baseline then builds its statement per call too);
 * - `posts`: the TypeORM example's table, `(id BIGINT PRIMARY KEY, user_id BIGINT, title
 *   VARCHAR(200), KEY (user_id))`, rows of 1000 authors over 16 logical shards in the example's
 *   order, written the way TypeORM writes them (parameters as quoted strings; the baseline with
 *   `DEFAULT` keys and `RETURNING id`, as TypeORM does on MariaDB).
 *
 * Every variant runs A-B-B-A against its shape's baseline in closed loops of SECONDS (default 1 s)
 * per slice, ROUNDS rounds (default 5), CONNS connections (default 1,16); both tables are emptied
 * before each pair. Per slice it records rows/s, the server's CPU time (all threads of the local
 * mariadbd, from /proc), the client's CPU time, and deltas of `Innodb_os_log_written`,
 * `Bytes_received` and `index_page_splits` (INNODB_METRICS; enabled by this script). The server's
 * pid is read from MYSQL_PID_FILE (default /run/mysqld/mysqld.pid). Reported:
 * medians of rows/s, of the per-pair ratios, and of the per-1000-row costs. `PROFILE=1` adds
 * `SHOW PROFILE` stage times (1 connection). VARIANTS=a,b keeps the variants whose names contain
 * a or b (and the baselines). `--json` prints JSON only. `--chart <file>` also writes every pair's
 * ratio for bench-charts (see bench-charts/README.md): one panel per shape and connection count,
 * each value one pair's rows/s over its baseline's (the baseline row is 1 in every pair).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { allocateIds, defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { createMysqlPool, installMysql, MysqlSource } from '@shardflake/mysql'
import type { RowDataPacket } from 'mysql2/promise'

const json = process.argv.includes('--json')
const chartIndex = process.argv.indexOf('--chart')
const chartFile = chartIndex >= 0 ? process.argv[chartIndex + 1] : undefined
const rounds = Number(process.env.ROUNDS ?? 5)
const seconds = Number(process.env.SECONDS ?? 1)
const url = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'
const connectionCounts = (process.env.CONNS ?? '1,16').split(',').map(Number)
const shapes = (process.env.SHAPES ?? 'kv,kvr,posts').split(',')
const PREFIX = 'sf_my_ek_'
const DB = `\`${PREFIX}data\``
const LOGICAL = 16
const log = (text: string) => {
  if (!json) console.log(text)
}
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

const admin = await createMysqlPool({ uri: url, connectionLimit: 2 })
const sessions = await createMysqlPool({ uri: url, connectionLimit: 20 })

async function dropAll(): Promise<void> {
  const [found] = await admin.query<RowDataPacket[]>(
    'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?',
    [`${PREFIX.replace(/_/g, '\\_')}%`],
  )
  for (const { name } of found) await admin.query(`DROP DATABASE \`${name}\``)
}

await dropAll()
const sharding = defineSharding({ layout: instagram, logicalShards: LOGICAL })
await installMysql(admin, { sharding, shards: 'all', schemaPrefix: `${PREFIX}shard_` })
await admin.query(`CREATE DATABASE ${DB}`)
await admin.query("SET GLOBAL innodb_monitor_enable = 'index_page_splits'")
const common = { sharding, databases: admin, schemaPrefix: `${PREFIX}shard_` }
const source = new MysqlSource(common)
const buffered10k = new MysqlSource({ ...common, prefetch: { size: 10_000 } })
const buffered1k = new MysqlSource({ ...common, prefetch: { size: 1000 } })
const buffered1kB = new MysqlSource({ ...common, prefetch: { size: 1000 } })
const inProcess = new InProcessSource({ sharding, shards: 'all' })

// ---- the kv shape ------------------------------------------------------------------------------
const KV = '(id BIGINT NOT NULL PRIMARY KEY, payload INT NOT NULL)'
const KV_AI = '(id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, payload INT NOT NULL)'
const ones = Array.from({ length: 1000 }, () => '(1)').join(',')
const nullOnes = Array.from({ length: 1000 }, () => '(NULL,1)').join(',')
const kvRows = (ids: readonly bigint[], quote = false) =>
  ids.map((id) => (quote ? `('${id}',1)` : `(${id},1)`)).join(',')
let local = 4_000_000_000_000_000_000n
const nextLocal = () => Array.from({ length: 1000 }, () => local++)
const shuffle = <T>(list: T[]): T[] => {
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[list[i], list[j]] = [list[j]!, list[i]!]
  }
  return list
}

// ---- kvr: the same table, each row's payload rendered per statement (as an application does) -----
let payloadNumber = 0
const payloads = () => Array.from({ length: 1000 }, () => `(${payloadNumber++ & 0x7fffffff})`)
const keyedPayloads = (ids: readonly bigint[]) =>
  ids.map((id) => `(${id},${payloadNumber++ & 0x7fffffff})`).join(',')

// ---- the posts shape (the TypeORM example's table and rows) ----------------------------------------
const POSTS =
  '(id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, title VARCHAR(200) NOT NULL, KEY (user_id))'
const POSTS_AI =
  '(id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, user_id BIGINT NOT NULL, title VARCHAR(200) NOT NULL, KEY (user_id))'
const users = Array.from({ length: 1000 }, (_, i) => 1801 + i * 7919)
let postNumber = 0
/** The example's next 1000 rows: authors in turn, shards 9, 8, 7, ... (7919 mod 16 = 15). */
function nextPosts(sorted = false): { user: number; shard: number; title: string }[] {
  const rows = Array.from({ length: 1000 }, () => {
    const n = postNumber++
    const user = users[n % users.length]!
    return { user, shard: user % LOGICAL, title: `post ${n}` }
  })
  return sorted ? rows.sort((a, b) => a.shard - b.shard) : rows
}
const postsAuto = (rows: ReturnType<typeof nextPosts>, returning: boolean) =>
  `VALUES ${rows.map((r) => `(DEFAULT,'${r.user}','${r.title}')`).join(',')}${returning ? ' RETURNING `id`' : ''}`
const postsKeyed = (rows: ReturnType<typeof nextPosts>, ids: readonly bigint[], quote = true) =>
  `VALUES ${rows.map((r, i) => `(${quote ? `'${ids[i]}'` : ids[i]},'${r.user}','${r.title}')`).join(',')}`

/**
 * The lever "one round trip for every shard of a call": `SELECT shard_a.reserve_ids(n_a),
 * shard_b.reserve_ids(n_b), ...` on one connection, IDs composed here as `MysqlSource` does.
 */
async function reserveAllShards(shards: readonly number[]): Promise<bigint[]> {
  const counts = new Map<number, number>()
  for (const shard of shards) counts.set(shard, (counts.get(shard) ?? 0) + 1)
  const list = [...counts]
  const [rows] = await admin.query<RowDataPacket[]>(
    `SELECT ${list.map(([shard, n], i) => `CAST(\`${PREFIX}shard_${shard}\`.reserve_ids(${n}) AS CHAR) AS v${i}`).join(', ')}`,
  )
  const next = new Map<number, bigint>(
    list.map(([shard], i) => [shard, BigInt(String(rows[0]![`v${i}`]))]),
  )
  const mask = (1n << BigInt(instagram.sequenceBits)) - 1n
  return shards.map((shard) => {
    const v = next.get(shard)!
    next.set(shard, v + 1n)
    return (
      ((v >> BigInt(instagram.sequenceBits)) << instagram.shifts.time) |
      (BigInt(shard) << instagram.shifts.shard) |
      (v & mask)
    )
  })
}

interface Variant {
  name: string
  shape: string
  /** Table name and definition; the table is emptied before each pair. */
  table: string
  ddl: string
  op: (run: Run) => Promise<void>
}
/** Sends one statement (on the pool, or on the profiled connection). */
type Run = (sql: string) => Promise<unknown>
const onPool: Run = (sql) => sessions.query(sql)
const insertInto = (table: string, columns: string) => `INSERT INTO ${DB}.${table} ${columns} `
const all: Variant[] = [
  {
    name: 'AUTO_INCREMENT (payload) VALUES (1)',
    shape: 'kv',
    table: 'kv_auto',
    ddl: KV_AI,
    op: async (run) => {
      await run(`${insertInto('kv_auto', '(payload)')}VALUES ${ones}`)
    },
  },
  {
    name: 'control: AUTO_INCREMENT (payload), a second table',
    shape: 'kv',
    table: 'kv_auto_control',
    ddl: KV_AI,
    op: async (run) => {
      await run(`${insertInto('kv_auto_control', '(payload)')}VALUES ${ones}`)
    },
  },
  {
    name: 'AUTO_INCREMENT (id, payload) VALUES (NULL, 1)',
    shape: 'kv',
    table: 'kv_auto_null',
    ddl: KV_AI,
    op: async (run) => {
      await run(`${insertInto('kv_auto_null', '(id, payload)')}VALUES ${nullOnes}`)
    },
  },
  {
    name: 'local ascending keys, AUTO_INCREMENT table',
    shape: 'kv',
    table: 'kv_auto_explicit',
    ddl: KV_AI,
    op: async (run) => {
      await run(`${insertInto('kv_auto_explicit', '(id, payload)')}VALUES ${kvRows(nextLocal())}`)
    },
  },
  {
    name: 'local ascending keys',
    shape: 'kv',
    table: 'kv_local',
    ddl: KV,
    op: async (run) => {
      await run(`${insertInto('kv_local', '(id, payload)')}VALUES ${kvRows(nextLocal())}`)
    },
  },
  {
    name: "local ascending keys, quoted ('…')",
    shape: 'kv',
    table: 'kv_quoted',
    ddl: KV,
    op: async (run) => {
      await run(`${insertInto('kv_quoted', '(id, payload)')}VALUES ${kvRows(nextLocal(), true)}`)
    },
  },
  {
    name: 'local keys, shuffled within the statement',
    shape: 'kv',
    table: 'kv_shuffled',
    ddl: KV,
    op: async (run) => {
      await run(
        `${insertInto('kv_shuffled', '(id, payload)')}VALUES ${kvRows(shuffle(nextLocal()))}`,
      )
    },
  },
  {
    name: 'MysqlSource nextIds(1000)',
    shape: 'kv',
    table: 'kv_source',
    ddl: KV,
    op: async (run) => {
      const ids = await source.nextIds(1, 1000)
      await run(`${insertInto('kv_source', '(id, payload)')}VALUES ${kvRows(ids)}`)
    },
  },
  {
    name: 'MysqlSource prefetch 10000',
    shape: 'kv',
    table: 'kv_prefetch',
    ddl: KV,
    op: async (run) => {
      const ids = await buffered10k.nextIds(1, 1000)
      await run(`${insertInto('kv_prefetch', '(id, payload)')}VALUES ${kvRows(ids)}`)
    },
  },
  {
    name: 'AUTO_INCREMENT (payload) VALUES (n)',
    shape: 'kvr',
    table: 'kvr_auto',
    ddl: KV_AI,
    op: async (run) => {
      await run(`${insertInto('kvr_auto', '(payload)')}VALUES ${payloads().join(',')}`)
    },
  },
  {
    name: 'control: the baseline on a second table',
    shape: 'kvr',
    table: 'kvr_auto_control',
    ddl: KV_AI,
    op: async (run) => {
      await run(`${insertInto('kvr_auto_control', '(payload)')}VALUES ${payloads().join(',')}`)
    },
  },
  {
    name: 'local ascending keys',
    shape: 'kvr',
    table: 'kvr_local',
    ddl: KV,
    op: async (run) => {
      await run(`${insertInto('kvr_local', '(id, payload)')}VALUES ${keyedPayloads(nextLocal())}`)
    },
  },
  {
    name: 'MysqlSource nextIds(1000)',
    shape: 'kvr',
    table: 'kvr_source',
    ddl: KV,
    op: async (run) => {
      const ids = await source.nextIds(1, 1000)
      await run(`${insertInto('kvr_source', '(id, payload)')}VALUES ${keyedPayloads(ids)}`)
    },
  },
  {
    name: 'MysqlSource prefetch 10000',
    shape: 'kvr',
    table: 'kvr_prefetch',
    ddl: KV,
    op: async (run) => {
      const ids = await buffered10k.nextIds(1, 1000)
      await run(`${insertInto('kvr_prefetch', '(id, payload)')}VALUES ${keyedPayloads(ids)}`)
    },
  },
  {
    name: 'AUTO_INCREMENT, DEFAULT keys, RETURNING id (TypeORM)',
    shape: 'posts',
    table: 'posts_auto',
    ddl: POSTS_AI,
    op: async (run) => {
      await run(
        `${insertInto('posts_auto', '(id, user_id, title)')}${postsAuto(nextPosts(), true)}`,
      )
    },
  },
  {
    name: 'control: the baseline on a second table',
    shape: 'posts',
    table: 'posts_auto_control',
    ddl: POSTS_AI,
    op: async (run) => {
      await run(
        `${insertInto('posts_auto_control', '(id, user_id, title)')}${postsAuto(nextPosts(), true)}`,
      )
    },
  },
  {
    name: 'AUTO_INCREMENT, DEFAULT keys, no RETURNING',
    shape: 'posts',
    table: 'posts_auto_noret',
    ddl: POSTS_AI,
    op: async (run) => {
      await run(
        `${insertInto('posts_auto_noret', '(id, user_id, title)')}${postsAuto(nextPosts(), false)}`,
      )
    },
  },
  {
    name: 'local ascending keys (no source)',
    shape: 'posts',
    table: 'posts_local',
    ddl: POSTS,
    op: async (run) => {
      const rows = nextPosts()
      await run(
        `${insertInto('posts_local', '(id, user_id, title)')}${postsKeyed(rows, nextLocal())}`,
      )
    },
  },
  {
    name: 'local ascending keys (no source), unquoted',
    shape: 'posts',
    table: 'posts_local_unquoted',
    ddl: POSTS,
    op: async (run) => {
      const rows = nextPosts()
      await run(
        `${insertInto('posts_local_unquoted', '(id, user_id, title)')}${postsKeyed(rows, nextLocal(), false)}`,
      )
    },
  },
  {
    name: 'InProcessSource, example row order',
    shape: 'posts',
    table: 'posts_inproc',
    ddl: POSTS,
    op: async (run) => {
      const rows = nextPosts()
      const ids = allocateIds(
        inProcess,
        rows.map((r) => r.shard),
      )
      await run(`${insertInto('posts_inproc', '(id, user_id, title)')}${postsKeyed(rows, ids)}`)
    },
  },
  {
    name: 'InProcessSource, rows sorted by shard',
    shape: 'posts',
    table: 'posts_inproc_sorted',
    ddl: POSTS,
    op: async (run) => {
      const rows = nextPosts(true)
      const ids = allocateIds(
        inProcess,
        rows.map((r) => r.shard),
      )
      await run(
        `${insertInto('posts_inproc_sorted', '(id, user_id, title)')}${postsKeyed(rows, ids)}`,
      )
    },
  },
  {
    name: 'InProcessSource, example order, keys unquoted',
    shape: 'posts',
    table: 'posts_inproc_unquoted',
    ddl: POSTS,
    op: async (run) => {
      const rows = nextPosts()
      const ids = allocateIds(
        inProcess,
        rows.map((r) => r.shard),
      )
      await run(
        `${insertInto('posts_inproc_unquoted', '(id, user_id, title)')}${postsKeyed(rows, ids, false)}`,
      )
    },
  },
  {
    name: 'MysqlSource, example row order',
    shape: 'posts',
    table: 'posts_source',
    ddl: POSTS,
    op: async (run) => {
      const rows = nextPosts()
      const ids = await allocateIds(
        source,
        rows.map((r) => r.shard),
      )
      await run(`${insertInto('posts_source', '(id, user_id, title)')}${postsKeyed(rows, ids)}`)
    },
  },
  {
    name: 'one SELECT reserving for all 16 shards, example row order',
    shape: 'posts',
    table: 'posts_one_reserve',
    ddl: POSTS,
    op: async (run) => {
      const rows = nextPosts()
      const ids = await reserveAllShards(rows.map((r) => r.shard))
      await run(
        `${insertInto('posts_one_reserve', '(id, user_id, title)')}${postsKeyed(rows, ids)}`,
      )
    },
  },
  {
    name: 'MysqlSource prefetch 1000, example row order',
    shape: 'posts',
    table: 'posts_prefetch',
    ddl: POSTS,
    op: async (run) => {
      const rows = nextPosts()
      const ids = await allocateIds(
        buffered1k,
        rows.map((r) => r.shard),
      )
      await run(`${insertInto('posts_prefetch', '(id, user_id, title)')}${postsKeyed(rows, ids)}`)
    },
  },
  {
    name: 'MysqlSource prefetch 1000, example row order, unquoted',
    shape: 'posts',
    table: 'posts_prefetch_unquoted',
    ddl: POSTS,
    op: async (run) => {
      const rows = nextPosts()
      const ids = await allocateIds(
        buffered1kB,
        rows.map((r) => r.shard),
      )
      await run(
        `${insertInto('posts_prefetch_unquoted', '(id, user_id, title)')}${postsKeyed(rows, ids, false)}`,
      )
    },
  },
]
const baselines = new Map<string, Variant>()
for (const variant of all) if (!baselines.has(variant.shape)) baselines.set(variant.shape, variant)
const variants = all.filter(
  (v) =>
    shapes.includes(v.shape) &&
    (baselines.get(v.shape) === v ||
      !process.env.VARIANTS ||
      process.env.VARIANTS.split(',').some((f) => v.name.includes(f))),
)
for (const variant of variants) {
  await admin.query(`CREATE TABLE ${DB}.${variant.table} ${variant.ddl}`)
}

// ---- counters ----------------------------------------------------------------------------------
const serverPid = (() => {
  try {
    return readFileSync(process.env.MYSQL_PID_FILE ?? '/run/mysqld/mysqld.pid', 'utf8').trim()
  } catch {
    return undefined
  }
})()
/** CPU time of every thread of the local mariadbd, in ns (schedstat), by thread id. */
function serverCpu(): Map<string, number> {
  const times = new Map<string, number>()
  if (!serverPid) return times
  for (const tid of readdirSync(`/proc/${serverPid}/task`)) {
    try {
      const [ns] = readFileSync(`/proc/${serverPid}/task/${tid}/schedstat`, 'utf8').split(' ')
      times.set(tid, Number(ns))
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return times
}
const cpuDelta = (before: Map<string, number>, after: Map<string, number>) => {
  let ns = 0
  for (const [tid, value] of after) ns += value - (before.get(tid) ?? 0)
  return ns
}
async function status(): Promise<Record<string, number>> {
  const [rows] = await admin.query<RowDataPacket[]>(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_os_log_written', 'Bytes_received', 'Innodb_rows_inserted')",
  )
  const [metrics] = await admin.query<RowDataPacket[]>(
    "SELECT `count` AS v FROM information_schema.INNODB_METRICS WHERE name = 'index_page_splits'",
  )
  const result: Record<string, number> = { splits: Number(metrics[0]?.v ?? 0) }
  for (const row of rows) result[String(row.Variable_name)] = Number(row.Value)
  return result
}

interface Slice {
  rows: number
  rate: number
  serverUsPerK: number
  clientUsPerK: number
  splitsPerK: number
  redoBytesPerRow: number
  sentBytesPerRow: number
}
async function measure(op: Variant['op'], connections: number): Promise<Slice> {
  const loop = async (end: number, count: { rows: number }) => {
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (Date.now() < end) {
          await op(onPool)
          count.rows += 1000
        }
      }),
    )
  }
  await loop(Date.now() + 150, { rows: 0 }) // warm-up, not counted
  const before = await status()
  const cpuBefore = serverCpu()
  const clientBefore = process.cpuUsage()
  const started = performance.now()
  const count = { rows: 0 }
  await loop(Date.now() + seconds * 1000, count)
  const elapsed = (performance.now() - started) / 1000
  const client = process.cpuUsage(clientBefore)
  const serverNs = cpuDelta(cpuBefore, serverCpu())
  const after = await status()
  const k = count.rows / 1000
  return {
    rows: count.rows,
    rate: count.rows / elapsed,
    serverUsPerK: serverNs / 1000 / k,
    clientUsPerK: (client.user + client.system) / k,
    splitsPerK: (after.splits! - before.splits!) / k,
    redoBytesPerRow: (after.Innodb_os_log_written! - before.Innodb_os_log_written!) / count.rows,
    sentBytesPerRow: (after.Bytes_received! - before.Bytes_received!) / count.rows,
  }
}

const empty = async (variant: Variant) => admin.query(`TRUNCATE TABLE ${DB}.${variant.table}`)
const slices = new Map<string, Slice[]>()
const ratios = new Map<string, number[]>()
const push = <T>(map: Map<string, T[]>, key: string, value: T) =>
  map.set(key, [...(map.get(key) ?? []), value])
const loadStart = loadavg()
/** The 1-minute load average at the start of every round, and at the end. */
const loads: number[] = []
log(
  `explicit keys vs AUTO_INCREMENT on ${url}: ${rounds} rounds, A-B-B-A pairs of ${seconds} s slices; load average ${loadStart.map((v) => v.toFixed(2)).join(' ')}`,
)
for (let round = 0; round < rounds; round++) {
  loads.push(loadavg()[0]!)
  for (const connections of connectionCounts) {
    for (const variant of variants) {
      const baseline = baselines.get(variant.shape)!
      if (variant === baseline) continue
      await empty(baseline)
      await empty(variant)
      const a1 = await measure(baseline.op, connections)
      const b1 = await measure(variant.op, connections)
      const b2 = await measure(variant.op, connections)
      const a2 = await measure(baseline.op, connections)
      push(slices, `${baseline.shape}|${baseline.name}|${connections}`, a1)
      push(slices, `${baseline.shape}|${baseline.name}|${connections}`, a2)
      push(slices, `${variant.shape}|${variant.name}|${connections}`, b1)
      push(slices, `${variant.shape}|${variant.name}|${connections}`, b2)
      push(
        ratios,
        `${variant.shape}|${variant.name}|${connections}`,
        (b1.rate + b2.rate) / (a1.rate + a2.rate),
      )
    }
  }
  log(`  round ${round + 1}/${rounds} done (load ${loadavg()[0]!.toFixed(2)})`)
}
const loadEnd = loadavg()
loads.push(loadEnd[0]!)
const loadRange = `${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`

// ---- SHOW PROFILE stages (one connection) ----------------------------------------------------------
const profiles = new Map<string, Map<string, number[]>>()
if (process.env.PROFILE) {
  const connection = await sessions.getConnection()
  for (let round = 0; round < 3; round++) {
    for (const variant of variants) {
      await empty(variant)
      for (let i = 0; i < 5; i++) await variant.op(onPool) // warm-up
      await connection.query('SET profiling_history_size = 0') // clears the history
      await connection.query('SET profiling_history_size = 100')
      await connection.query('SET profiling = 1')
      for (let i = 0; i < 30; i++) await variant.op((sql) => connection.query(sql))
      await connection.query('SET profiling = 0')
      const [listed] = await connection.query<RowDataPacket[]>('SHOW PROFILES')
      const inserts = listed
        .filter((row) => /^\s*INSERT/i.test(String(row.Query)))
        .map((row) => Number(row.Query_ID))
      const [stages] = await connection.query<RowDataPacket[]>(
        'SELECT STATE AS state, SUM(DURATION) AS seconds, COUNT(DISTINCT QUERY_ID) AS queries FROM information_schema.PROFILING WHERE QUERY_ID IN (?) GROUP BY STATE',
        [inserts],
      )
      const byState =
        profiles.get(`${variant.shape}|${variant.name}`) ?? new Map<string, number[]>()
      for (const stage of stages) {
        const key = String(stage.state)
        byState.set(key, [
          ...(byState.get(key) ?? []),
          (Number(stage.seconds) * 1e6) / Number(stage.queries),
        ])
      }
      profiles.set(`${variant.shape}|${variant.name}`, byState)
    }
  }
  connection.release()
}

// Keys are unique by the primary keys; the sourced ones must be shardflake IDs (above 2^53).
for (const variant of variants.filter(
  (v) => v.table.includes('source') || v.table.includes('prefetch'),
)) {
  const [check] = await admin.query<RowDataPacket[]>(
    `SELECT COUNT(*) AS n FROM ${DB}.${variant.table} WHERE id < 1 << 53`,
  )
  if (Number(check[0]!.n) !== 0) throw new Error(`IDs of ${variant.table} are not shardflake IDs`)
}

const results = connectionCounts.flatMap((connections) =>
  variants.map((variant) => {
    const key = `${variant.shape}|${variant.name}|${connections}`
    const list = slices.get(key) ?? []
    const pairs = ratios.get(key)
    const of = (pick: (slice: Slice) => number) => median(list.map(pick))
    return {
      shape: variant.shape,
      name: variant.name,
      connections,
      perSecond: Math.round(of((s) => s.rate)),
      ratio: pairs ? Number(median(pairs).toFixed(2)) : null,
      ratioMin: pairs ? Number(Math.min(...pairs).toFixed(2)) : null,
      ratioMax: pairs ? Number(Math.max(...pairs).toFixed(2)) : null,
      serverMsPer1000: Number((of((s) => s.serverUsPerK) / 1000).toFixed(2)),
      clientMsPer1000: Number((of((s) => s.clientUsPerK) / 1000).toFixed(2)),
      splitsPer1000: Number(of((s) => s.splitsPerK).toFixed(1)),
      redoBytesPerRow: Number(of((s) => s.redoBytesPerRow).toFixed(1)),
      sentBytesPerRow: Number(of((s) => s.sentBytesPerRow).toFixed(1)),
      profileUs: profiles.has(`${variant.shape}|${variant.name}`)
        ? Object.fromEntries(
            [...profiles.get(`${variant.shape}|${variant.name}`)!].map(([state, values]) => [
              state,
              Math.round(median(values)),
            ]),
          )
        : undefined,
    }
  }),
)
if (chartFile) {
  const [versionRows] = await admin.query<RowDataPacket[]>('SELECT VERSION() AS version')
  const shapeTitles: Record<string, string> = {
    kv: 'kv: (id, payload), every payload 1',
    kvr: 'kvr: (id, payload), payloads rendered per statement',
    posts: 'posts: the TypeORM example’s table and statement',
  }
  const chart = {
    title: '1000-row INSERTs carrying their own keys, against AUTO_INCREMENT',
    unit: '× AUTO_INCREMENT',
    note: [
      `${new Date().toISOString().slice(0, 10)}, ${String(versionRows[0]!.version)}, ${rounds} A-B-B-A pairs of ${seconds} s slices per variant, Node ${process.versions.node}`,
      'Each value: one pair’s rows/s over its baseline’s, both tables emptied first',
      `Load average ${loadRange} (1 min, at the start of every round and at the end) on ${availableParallelism()} shared cores`,
    ],
    baseline: 'baseline',
    roundName: 'pair',
    rows: connectionCounts.flatMap((connections) =>
      variants.map((variant) => {
        const baseline = baselines.get(variant.shape)!
        const group = `${shapeTitles[variant.shape] ?? variant.shape}, ${connections} connection${connections > 1 ? 's' : ''} (baseline: ${baseline.name})`
        const pairs = ratios.get(`${variant.shape}|${variant.name}|${connections}`)
        return pairs
          ? { group, label: variant.name, values: pairs.map((r) => Number(r.toFixed(4))) }
          : { group, label: 'baseline', values: Array.from({ length: rounds }, () => 1) }
      }),
    ),
  }
  writeFileSync(chartFile, JSON.stringify(chart))
}
const report = {
  url,
  date: new Date().toISOString(),
  rounds,
  seconds,
  loadAverage: { start: loadStart, end: loadEnd, range: loadRange },
  results,
}
if (json) console.log(JSON.stringify(report, null, 2))
else {
  log(
    `load average at the end ${loadEnd.map((v) => v.toFixed(2)).join(' ')}; 1-min range ${loadRange}`,
  )
  log(
    '\n| shape | variant | conns | rows/s | ratio (min..max) | server ms/1000 rows | client ms/1000 rows | page splits/1000 rows | redo B/row | sent B/row |',
  )
  log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const r of results) {
    log(
      `| ${r.shape} | ${r.name} | ${r.connections} | ${r.perSecond.toLocaleString('en')} | ${r.ratio === null ? 'baseline' : `${r.ratio}x (${r.ratioMin}..${r.ratioMax})`} | ${r.serverMsPer1000} | ${r.clientMsPer1000} | ${r.splitsPer1000} | ${r.redoBytesPerRow} | ${r.sentBytesPerRow} |`,
    )
  }
  if (profiles.size) {
    log('\nSHOW PROFILE, µs per statement (median of 3 rounds of 30 statements, 1 connection):')
    for (const r of results.filter((r) => r.profileUs && r.connections === connectionCounts[0])) {
      const stages = Object.entries(r.profileUs!)
        .filter(([, us]) => us >= 5)
        .sort((a, b) => b[1] - a[1])
        .map(([state, us]) => `${state} ${us}`)
      log(`- ${r.shape} / ${r.name}: ${stages.join(', ')}`)
    }
  }
}
await dropAll()
await Promise.all([
  admin.end(),
  sessions.end(),
  source.close(),
  buffered10k.close(),
  buffered1k.close(),
])
