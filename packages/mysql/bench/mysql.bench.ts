/**
 * `pnpm bench` (mysql): the per-shard routines and sources against MariaDB's own baselines, in one
 * run, on the server at MYSQL_URL (default mysql://root@127.0.0.1:3306/test).
 *
 * 1. Generators, 1 and 16 connections: `SELECT shard.next_id()` against `SELECT NEXTVAL(seq)` on a
 *    bare sequence (the floor); `CALL shard.next_ids(1000)` and `MysqlSource.nextIds(1000)` against
 *    `SELECT NEXTVAL(seq) FROM seq_1_to_1000`.
 * 2. INSERTs, 1 and 16 connections: AUTO_INCREMENT single-row and 1000-row against rows whose IDs
 *    come from the routine (inline `VALUES (shard.next_id(), ...)`, or `MysqlSource` then INSERT).
 * 3. Ticket servers, 1 and 16 connections: Flickr's `REPLACE INTO` (InnoDB) against our single-row
 *    `UPDATE ... LAST_INSERT_ID(id + n)` function, with failed calls (deadlocks) counted.
 *
 * Every cell is a closed loop (one request in flight per connection) for SECONDS (default 1.5 s);
 * each round runs every cell once (ROUNDS, default 7), in reverse order every other round, so a
 * cell and its baseline run seconds apart, on either side alike. Reported: medians of the rounds,
 * and the ratio to the baseline as the median (min..max) of the per-round ratios, which load that
 * drifts during a run does not move. Duplicates of every ID that reaches the client are counted.
 * `--json` prints JSON only; `--chart <file>` also writes every round's figures for bench-charts
 * (see bench-charts/README.md), one panel per group and connection count.
 */
import { writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { defineSharding, instagram } from '@shardflake/core'
import {
  createMysqlPool,
  installMysql,
  installTicketServers,
  MysqlSource,
  TicketServerSource,
} from '@shardflake/mysql'
import type { Pool } from 'mysql2/promise'

const json = process.argv.includes('--json')
const chartIndex = process.argv.indexOf('--chart')
const chartFile = chartIndex >= 0 ? process.argv[chartIndex + 1] : undefined
const rounds = Number(process.env.ROUNDS ?? 7)
const seconds = Number(process.env.SECONDS ?? 1.5)
const url = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'
const PREFIX = 'sf_my_bench_'
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

async function setup(): Promise<void> {
  const [found] = await pool.query(
    'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?',
    [`${PREFIX.replace(/_/g, '\\_')}%`],
  )
  for (const { name } of found as { name: string }[]) await pool.query(`DROP DATABASE \`${name}\``)
  await installMysql(pool, {
    sharding,
    shards: [1],
    schemaPrefix: `${PREFIX}shard_`,
  })
  await pool.query(`CREATE DATABASE ${DB}`)
  await pool.query(`CREATE SEQUENCE ${DB}.bare START WITH 1 INCREMENT BY 1 CACHE 1000`)
  await pool.query(
    `CREATE TABLE ${DB}.t_ai (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, payload INT NOT NULL)`,
  )
  await pool.query(`CREATE TABLE ${DB}.t_sf (id BIGINT NOT NULL PRIMARY KEY, payload INT NOT NULL)`)
  await pool.query(
    `CREATE TABLE ${DB}.tickets64 (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, stub CHAR(1) NOT NULL DEFAULT '', UNIQUE KEY stub (stub)) ENGINE=InnoDB`,
  )
}

await setup()
const source = new MysqlSource({ sharding, databases: pool, schemaPrefix: `${PREFIX}shard_` })
const buffered = new MysqlSource({
  sharding,
  databases: pool,
  schemaPrefix: `${PREFIX}shard_`,
  prefetch: { size: 1000 },
})
const bulk = new MysqlSource({
  sharding,
  databases: pool,
  schemaPrefix: `${PREFIX}shard_`,
  prefetch: { size: 10_000 },
})
const ticketOptions = { servers: [{ pool, database: `${PREFIX}tickets` }], sequence: 'bench' }
await installTicketServers(ticketOptions)
const tickets = new TicketServerSource(ticketOptions)

const rows1000 = Array.from({ length: 1000 }, () => '(1)').join(',')
const insertWithIds = (ids: bigint[]) =>
  `INSERT INTO ${DB}.t_sf (id, payload) VALUES ${ids.map((id) => `(${id},1)`).join(',')}`

/** One operation: returns the IDs it produced (for the duplicate check) and how many rows/IDs. */
type Op = (pool: Pool) => Promise<{ count: number; ids?: readonly (bigint | string)[] }>

const first = <T>(result: unknown): T => (result as T[])[0]!

interface Cell {
  group: string
  name: string
  op: Op
  /** The baseline cell's name in the same group (for the ratio). */
  baseline?: string
}

const cells: Cell[] = [
  {
    group: 'single ID per call',
    name: 'NEXTVAL(bare sequence)',
    op: async (p) => {
      const [r] = await p.query(`SELECT CAST(NEXTVAL(${DB}.bare) AS CHAR) AS v`)
      return { count: 1, ids: [first<{ v: string }>(r).v] }
    },
  },
  {
    group: 'single ID per call',
    name: 'SELECT shard.next_id()',
    baseline: 'NEXTVAL(bare sequence)',
    op: async (p) => {
      const [r] = await p.query(`SELECT ${SHARD}.next_id() AS v`)
      return { count: 1, ids: [first<{ v: string }>(r).v] }
    },
  },
  {
    group: 'single ID per call',
    name: 'MysqlSource.nextId()',
    baseline: 'NEXTVAL(bare sequence)',
    op: async () => {
      const id = await source.nextId(1)
      return { count: 1, ids: [id] }
    },
  },
  {
    group: 'single ID per call',
    name: 'MysqlSource (prefetch 1000).nextId()',
    baseline: 'NEXTVAL(bare sequence)',
    op: async () => ({ count: 1, ids: [await buffered.nextId(1)] }),
  },
  {
    group: '1000 IDs per call',
    name: 'NEXTVAL x1000 (seq_1_to_1000)',
    op: async (p) => {
      const [r] = await p.query(`SELECT CAST(NEXTVAL(${DB}.bare) AS CHAR) AS v FROM seq_1_to_1000`)
      return { count: 1000, ids: (r as { v: string }[]).map((x) => x.v) }
    },
  },
  {
    group: '1000 IDs per call',
    name: 'CALL shard.next_ids(1000)',
    baseline: 'NEXTVAL x1000 (seq_1_to_1000)',
    op: async (p) => {
      const [sets] = await p.query(`CALL ${SHARD}.next_ids(1000)`)
      return { count: 1000, ids: (sets as { id: string }[][])[0]!.map((x) => x.id) }
    },
  },
  {
    group: '1000 IDs per call',
    name: 'MysqlSource.nextIds(1000)',
    baseline: 'NEXTVAL x1000 (seq_1_to_1000)',
    op: async () => {
      const ids = await source.nextIds(1, 1000)
      return { count: 1000, ids }
    },
  },
  {
    group: 'INSERT single-row',
    name: 'AUTO_INCREMENT',
    op: async (p) => {
      await p.query(`INSERT INTO ${DB}.t_ai (payload) VALUES (1)`)
      return { count: 1 }
    },
  },
  {
    group: 'INSERT single-row',
    name: 'VALUES (shard.next_id(), 1)',
    baseline: 'AUTO_INCREMENT',
    op: async (p) => {
      await p.query(`INSERT INTO ${DB}.t_sf (id, payload) VALUES (${SHARD}.next_id(), 1)`)
      return { count: 1 }
    },
  },
  {
    group: 'INSERT single-row',
    name: 'MysqlSource.nextId() + INSERT',
    baseline: 'AUTO_INCREMENT',
    op: async (p) => {
      const id = await source.nextId(1)
      await p.query(insertWithIds([id]))
      return { count: 1 }
    },
  },
  {
    group: 'INSERT single-row',
    name: 'MysqlSource (prefetch 1000) + INSERT',
    baseline: 'AUTO_INCREMENT',
    op: async (p) => {
      const id = await buffered.nextId(1)
      await p.query(insertWithIds([id]))
      return { count: 1 }
    },
  },
  {
    group: 'INSERT 1000-row',
    name: 'AUTO_INCREMENT',
    op: async (p) => {
      await p.query(`INSERT INTO ${DB}.t_ai (payload) VALUES ${rows1000}`)
      return { count: 1000 }
    },
  },
  {
    group: 'INSERT 1000-row',
    name: 'MysqlSource.nextIds(1000) + INSERT',
    baseline: 'AUTO_INCREMENT',
    op: async (p) => {
      const ids = await source.nextIds(1, 1000)
      await p.query(insertWithIds(ids))
      return { count: 1000 }
    },
  },
  {
    group: 'INSERT 1000-row',
    name: 'MysqlSource (prefetch 10000).nextIds(1000) + INSERT',
    baseline: 'AUTO_INCREMENT',
    op: async (p) => {
      const ids = await bulk.nextIds(1, 1000)
      await p.query(insertWithIds(ids))
      return { count: 1000 }
    },
  },
  {
    group: 'ticket server',
    name: "REPLACE INTO Tickets64 (stub) VALUES ('a')",
    op: async (p) => {
      const [r] = await p.query(`REPLACE INTO ${DB}.tickets64 (stub) VALUES ('a')`)
      return { count: 1, ids: [String((r as { insertId: string | number }).insertId)] }
    },
  },
  {
    group: 'ticket server',
    name: 'TicketServerSource.nextId() (UPDATE)',
    baseline: "REPLACE INTO Tickets64 (stub) VALUES ('a')",
    op: async () => ({ count: 1, ids: [await tickets.nextId(0)] }),
  },
]

interface Run {
  perSecond: number
  errors: number
  duplicates: number
}

async function measure(cell: Cell, connections: number): Promise<Run> {
  const seen = new Set<string>()
  let produced = 0
  let counted = 0
  let errors = 0
  let measuring = false
  const warmupEnd = Date.now() + 200
  const end = warmupEnd + seconds * 1000
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (Date.now() < end) {
        if (!measuring && Date.now() >= warmupEnd) measuring = true
        try {
          const { count, ids } = await cell.op(sessions)
          if (measuring) counted += count
          if (ids) {
            for (const id of ids) seen.add(String(id))
            produced += ids.length
          }
        } catch {
          errors++
        }
      }
    }),
  )
  return { perSecond: counted / seconds, errors, duplicates: produced - seen.size }
}

const runs = new Map<string, Run[]>()
const key = (cell: Cell, connections: number) => `${cell.group}|${cell.name}|${connections}`
const [versionRows] = await pool.query('SELECT VERSION() AS version')
const serverVersion = first<{ version: string }>(versionRows).version
/** The 1-minute load average at the start of every round, and at the end. */
const loads: number[] = []
log(
  `${serverVersion} on ${url}: ${rounds} rounds of ${seconds} s per cell, every other round reversed...`,
)
for (let round = 0; round < rounds; round++) {
  loads.push(loadavg()[0]!)
  const connectionOrder = round % 2 === 0 ? [1, 16] : [16, 1]
  const cellOrder = round % 2 === 0 ? cells : [...cells].reverse()
  for (const connections of connectionOrder) {
    for (const cell of cellOrder) {
      const run = await measure(cell, connections)
      const list = runs.get(key(cell, connections)) ?? []
      list.push(run)
      runs.set(key(cell, connections), list)
    }
  }
  log(`  round ${round + 1}/${rounds} done (load average at its start ${loads.at(-1)!.toFixed(2)})`)
}
loads.push(loadavg()[0]!)
const loadRange = `${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`
const baselineOf = (cell: Cell) =>
  cell.baseline ? cells.find((c) => c.group === cell.group && c.name === cell.baseline) : undefined

const results = cells.flatMap((cell) =>
  [1, 16].map((connections) => {
    const list = runs.get(key(cell, connections))!
    const perSecond = Math.round(median(list.map((r) => r.perSecond)))
    const baseCell = baselineOf(cell)
    // Round by round: the cell against its baseline measured seconds apart in the same round.
    const ratios = baseCell
      ? list.map(
          (r, round) => r.perSecond / runs.get(key(baseCell, connections))![round]!.perSecond,
        )
      : undefined
    return {
      group: cell.group,
      name: cell.name,
      connections,
      perSecond,
      min: Math.round(Math.min(...list.map((r) => r.perSecond))),
      max: Math.round(Math.max(...list.map((r) => r.perSecond))),
      ratio: ratios ? Number(median(ratios).toFixed(2)) : undefined,
      ratioMin: ratios ? Number(Math.min(...ratios).toFixed(2)) : undefined,
      ratioMax: ratios ? Number(Math.max(...ratios).toFixed(2)) : undefined,
      errors: list.reduce((sum, r) => sum + r.errors, 0),
      duplicates: list.reduce((sum, r) => sum + r.duplicates, 0),
    }
  }),
)

if (chartFile) {
  const chart = {
    title: 'MySQL routines and sources against MariaDB’s own baselines, same run',
    unit: 'IDs or rows/s',
    note: [
      `${new Date().toISOString().slice(0, 10)}, ${serverVersion}, ${rounds} rounds of ${seconds} s per cell, Node ${process.versions.node}`,
      `Load average ${loadRange} (1 min, at the start of every round and at the end) on ${availableParallelism()} shared cores`,
    ],
    baseline: 'baseline',
    rows: [1, 16].flatMap((connections) =>
      cells.map((cell) => {
        const base = cell.baseline ?? cell.name
        const group = `${cell.group}, ${connections} connection${connections > 1 ? 's' : ''} (baseline: ${base})`
        return {
          group,
          label: cell.baseline ? cell.name : 'baseline',
          values: runs.get(key(cell, connections))!.map((r) => Math.round(r.perSecond)),
        }
      }),
    ),
  }
  writeFileSync(chartFile, JSON.stringify(chart))
}

if (json) {
  console.log(JSON.stringify({ url, serverVersion, rounds, seconds, loads, results }, null, 2))
} else {
  log('')
  log(
    `load average (1 min) ${loadRange}, at the end ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  )
  log(
    '| group | variant | conns | IDs or rows/s (median) | min..max | ratio to baseline (median of rounds) | min..max | failed calls | duplicates |',
  )
  log('|---|---|---:|---:|---:|---:|---:|---:|---:|')
  for (const r of results) {
    log(
      `| ${r.group} | ${r.name} | ${r.connections} | ${r.perSecond.toLocaleString('en')} | ${r.min.toLocaleString('en')}..${r.max.toLocaleString('en')} | ${r.ratio === undefined ? 'baseline' : `${r.ratio}x`} | ${r.ratio === undefined ? '' : `${r.ratioMin}..${r.ratioMax}`} | ${r.errors} | ${r.duplicates} |`,
    )
  }
}

const [found] = await pool.query(
  'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?',
  [`${PREFIX.replace(/_/g, '\\_')}%`],
)
for (const { name } of found as { name: string }[]) await pool.query(`DROP DATABASE \`${name}\``)
await Promise.all([pool.end(), sessions.end()])
