/**
 * `pnpm --filter @shardflake/mysql bench:insert` : where the time of a 1000-row INSERT with IDs
 * from the routine goes, and what each lever buys, against AUTO_INCREMENT in the same run
 * (MYSQL_URL, default mysql://root@127.0.0.1:3306/test).
 *
 * Variants, all 1000 rows of `(id, payload INT)` per statement, 1 and 16 connections:
 * - AUTO_INCREMENT (the baseline), text protocol;
 * - `MysqlSource.nextIds(1000)` + INSERT of 1000 literals (what the ORM adapters do);
 * - the same INSERT with IDs made locally (no reserve round trip): the cost of the literals alone;
 * - `nextIds(1000)` + a prepared INSERT (binary protocol, IDs as 8-byte LONGLONG parameters);
 * - `MysqlSource({ prefetch: { size: 10000 } }).nextIds(1000)` + INSERT (one reserve per 10 batches);
 * - one multi-statement round trip (`SET @v = reserve_ids(1000); INSERT ... SELECT <ID of @v+seq>
 *   FROM seq_0_to_999; SELECT @v`): the ceiling of "no second round trip" (uniform rows only).
 *
 * Closed loops of SECONDS (default 1 s) per slice; per round each variant runs in A-B-B-A order
 * with the baseline (ROUNDS, default 5); medians of rows/s and of the per-pair ratios. `--json` prints JSON only. VARIANTS=a,b keeps the variants whose
 * names contain a or b (and the baseline).
 */
import { defineSharding, instagram } from '@shardflake/core'
import { createMysqlPool, installMysql, MysqlSource } from '@shardflake/mysql'
import mysqlCallbacks from 'mysql2'

const json = process.argv.includes('--json')
const rounds = Number(process.env.ROUNDS ?? 5)
const seconds = Number(process.env.SECONDS ?? 1)
const url = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'
const connectionCounts = (process.env.CONNS ?? '1,16').split(',').map(Number)
const PREFIX = 'sf_my_lever_'
const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
const DB = `\`${PREFIX}data\``
const SHARD = `\`${PREFIX}shard_1\``
const log = (text: string) => {
  if (!json) console.log(text)
}
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

const pool = await createMysqlPool({ uri: url, connectionLimit: 20 })
const sessions = await createMysqlPool({ uri: url, connectionLimit: 20 })
const multi = await createMysqlPool({ uri: url, connectionLimit: 20, multipleStatements: true })

async function dropAll(): Promise<void> {
  const [found] = await pool.query(
    'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?',
    [`${PREFIX.replace(/_/g, '\\_')}%`],
  )
  for (const { name } of found as { name: string }[]) await pool.query(`DROP DATABASE \`${name}\``)
}

await dropAll()
await installMysql(pool, { sharding, shards: [1], schemaPrefix: `${PREFIX}shard_` })
await pool.query(`CREATE DATABASE ${DB}`)
await pool.query(
  `CREATE TABLE ${DB}.t_ai (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, payload INT NOT NULL)`,
)
for (const table of ['t_sf', 't_local', 't_small', 't_local_prep', 't_prep', 't_pre', 't_multi']) {
  await pool.query(
    `CREATE TABLE ${DB}.${table} (id BIGINT NOT NULL PRIMARY KEY, payload INT NOT NULL)`,
  )
}

const source = new MysqlSource({ sharding, databases: pool, schemaPrefix: `${PREFIX}shard_` })
const buffered = new MysqlSource({
  sharding,
  databases: pool,
  schemaPrefix: `${PREFIX}shard_`,
  prefetch: { size: 10_000 },
})

const rows1000 = Array.from({ length: 1000 }, () => '(1)').join(',')
const insertText = (table: string, ids: readonly bigint[]) =>
  `INSERT INTO ${DB}.${table} (id, payload) VALUES ${ids.map((id) => `(${id},1)`).join(',')}`
const prepared = `INSERT INTO ${DB}.t_prep (id, payload) VALUES ${Array.from({ length: 1000 }, () => '(?,1)').join(',')}`
const preparedLocal = prepared.replace('t_prep', 't_local_prep')
const BIGINT = mysqlCallbacks.TypedParameter.BIGINT
// Locally made 19-digit IDs (a range the routine never reaches here): literals without a reserve.
let local = 4_000_000_000_000_000_000n
// Short literals: is it the 19 digits or the explicit key?
let small = 1_000_000n
const S = instagram.sequenceBits
const shardBits = 1n << instagram.shifts.shard
const idOf = (v: string) =>
  `((${v}) >> ${S} << ${instagram.shifts.time}) | ${shardBits} | ((${v}) & ${(1 << S) - 1})`
const multiSql = `SET @v = ${SHARD}.reserve_ids(1000); INSERT INTO ${DB}.t_multi (id, payload) SELECT ${idOf('@v + seq')}, 1 FROM seq_0_to_999; SELECT CAST(@v AS CHAR) AS v`

type Op = () => Promise<number>
const variants: { name: string; op: Op }[] = [
  {
    name: 'AUTO_INCREMENT',
    op: async () => {
      await sessions.query(`INSERT INTO ${DB}.t_ai (payload) VALUES ${rows1000}`)
      return 1000
    },
  },
  {
    name: 'nextIds(1000) + INSERT (text)',
    op: async () => {
      await sessions.query(insertText('t_sf', await source.nextIds(1, 1000)))
      return 1000
    },
  },
  {
    name: 'local IDs + INSERT (text, no reserve)',
    op: async () => {
      const ids = Array.from({ length: 1000 }, () => local++)
      await sessions.query(insertText('t_local', ids))
      return 1000
    },
  },
  {
    name: 'local 7-digit IDs + INSERT (text, no reserve)',
    op: async () => {
      const ids = Array.from({ length: 1000 }, () => small++)
      await sessions.query(insertText('t_small', ids))
      return 1000
    },
  },
  {
    name: 'nextIds(1000) + prepared INSERT (binary)',
    op: async () => {
      const ids = await source.nextIds(1, 1000)
      await sessions.execute(prepared, ids.map(BIGINT) as never)
      return 1000
    },
  },
  {
    name: 'local IDs + prepared INSERT (binary, no reserve)',
    op: async () => {
      const ids = Array.from({ length: 1000 }, () => BIGINT(local++))
      await sessions.execute(preparedLocal, ids as never)
      return 1000
    },
  },
  {
    name: 'prefetch 10000: nextIds(1000) + INSERT (text)',
    op: async () => {
      await sessions.query(insertText('t_pre', await buffered.nextIds(1, 1000)))
      return 1000
    },
  },
  {
    name: 'one multi-statement round trip (uniform rows)',
    op: async () => {
      await multi.query(multiSql)
      return 1000
    },
  },
].filter(
  (v, i) =>
    i === 0 ||
    !process.env.VARIANTS ||
    process.env.VARIANTS.split(',').some((f) => v.name.includes(f)),
)

async function measure(op: Op, connections: number): Promise<number> {
  let counted = 0
  let measuring = false
  const warmupEnd = Date.now() + 200
  const end = warmupEnd + seconds * 1000
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (Date.now() < end) {
        if (!measuring && Date.now() >= warmupEnd) measuring = true
        const n = await op()
        if (measuring) counted += n
      }
    }),
  )
  return counted / seconds
}

// Each variant is paired with the baseline in the same round, A B B A, so that the load of a
// shared machine cancels out of the ratio; reported: median rows/s and median of the ratios.
const [baseline, ...others] = variants
const rates = new Map<string, number[]>()
const ratios = new Map<string, number[]>()
const push = (map: Map<string, number[]>, key: string, value: number) =>
  map.set(key, [...(map.get(key) ?? []), value])
log(`INSERT levers on ${url}: ${rounds} rounds, A-B-B-A pairs of ${seconds} s slices`)
for (let round = 0; round < rounds; round++) {
  for (const connections of connectionCounts) {
    for (const variant of others) {
      const a1 = await measure(baseline!.op, connections)
      const b1 = await measure(variant.op, connections)
      const b2 = await measure(variant.op, connections)
      const a2 = await measure(baseline!.op, connections)
      push(rates, `${baseline!.name}|${connections}`, (a1 + a2) / 2)
      push(rates, `${variant.name}|${connections}`, (b1 + b2) / 2)
      push(ratios, `${variant.name}|${connections}`, (b1 + b2) / (a1 + a2))
    }
  }
  log(`  round ${round + 1}/${rounds} done`)
}

// Every routine-made ID is unique (primary keys), and the multi-statement IDs decode right.
for (const table of ['t_sf', 't_prep', 't_pre', 't_multi']) {
  const [check] = await pool.query(
    `SELECT COUNT(*) AS n FROM ${DB}.${table} WHERE ${SHARD}.id_shard(id) <> 1 OR id < 1 << 53`,
  )
  const bad = Number((check as { n: number | string }[])[0]!.n)
  if (bad !== 0) throw new Error(`${bad} IDs of ${table} do not decode to shard 1`)
}

const results = connectionCounts.flatMap((connections) =>
  variants.map((variant) => {
    const key = `${variant.name}|${connections}`
    const list = ratios.get(key) ?? [1]
    return {
      name: variant.name,
      connections,
      perSecond: Math.round(median(rates.get(key)!)),
      ratio: Number(median(list).toFixed(2)),
      ratioMin: Number(Math.min(...list).toFixed(2)),
      ratioMax: Number(Math.max(...list).toFixed(2)),
    }
  }),
)
if (json) console.log(JSON.stringify({ url, rounds, seconds, results }, null, 2))
else {
  log(
    '\n| variant | conns | rows/s (median) | ratio to AUTO_INCREMENT (median of pairs) | min..max |',
  )
  log('|---|---:|---:|---:|---:|')
  for (const r of results) {
    log(
      `| ${r.name} | ${r.connections} | ${r.perSecond.toLocaleString('en')} | ${r.ratio}x | ${r.ratioMin}..${r.ratioMax} |`,
    )
  }
}
await dropAll()
await Promise.all([pool.end(), sessions.end(), multi.end(), source.close(), buffered.close()])
