import {
  ConfigurationError,
  defineLayout,
  defineSharding,
  InvalidArgumentError,
  InvalidIdentifierError,
  instagram,
  LockTimeoutError,
  ShardingMismatchError,
  ShardMap,
  ShardMovedError,
} from '@shardflake/core'
import type { Pool, PoolConnection } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  installMysql,
  type MoveProgress,
  MysqlSource,
  moveMysqlShards,
  mysqlTriggerSql,
  SIGNALS,
} from '../src'
import { fenceStatements } from '../src/sql/fence'
import { type MysqlSqlOptions, resolveSqlOptions } from '../src/sql/options'
import { shardStatements } from '../src/sql/script'
import {
  createPool,
  dropDatabases,
  MYSQL_URL,
  RUN,
  rows,
  runDdl,
  startMariadb,
  type ThrowawayServer,
} from './helpers'

const fenceSql = (o: MysqlSqlOptions, shard: number, to: string) =>
  fenceStatements(resolveSqlOptions(o), shard, to)
const mysqlShardStatements = (o: MysqlSqlOptions, shard: number) =>
  shardStatements(resolveSqlOptions(o), shard)

/**
 * Moving logical shards from one MariaDB server (A, the shared one) to another (B, started for
 * this file): the old home is fenced, the new one continues at or above the fence, and no ID is
 * ever issued twice — after a burst far ahead of the clock, under concurrent draws on the old
 * home, through a stored procedure that keeps old routine bodies cached, when run again, after a
 * crash half-way, and when moved back. Every ID is collected and counted; state is read back raw.
 */
const PREFIX = `sf_my_move_${RUN}_`
const SHARDS = `${PREFIX}shard_`
const LOG = `\`${PREFIX}log\``
const layout = instagram
const sharding = defineSharding({ layout, logicalShards: 8192 })
/** The first counter value past the layout's time field; a fenced counter is L + LIMIT + 1. */
const LIMIT = BigInt(layout.timeLimit) << 10n

let second: ThrowawayServer
let poolA: Pool
let poolB: Pool
/** The move's own connections (one each, so their session state can be read back). */
let adminA: Pool
let adminB: Pool
/** What B calls itself, as the move records it on A. */
let destination: string

beforeAll(async () => {
  second = await startMariadb()
  poolA = createPool(MYSQL_URL, { connectionLimit: 16 })
  poolB = createPool(second.url, { connectionLimit: 16 })
  adminA = createPool(MYSQL_URL, { connectionLimit: 1 })
  adminB = createPool(second.url, { connectionLimit: 1 })
  await dropDatabases(poolA, PREFIX)
  await installMysql(poolA, {
    sharding,
    shards: [0, 1, 2, 3, 4, 6, 8, 9],
    schemaPrefix: SHARDS,
  })
  // Shard 5 may run a minute ahead of the clock (the burst below); shard 7 has an InnoDB counter.
  await installMysql(poolA, { sharding, shards: [5], schemaPrefix: SHARDS, maxDriftMs: 60_000 })
  await installMysql(poolA, { sharding, shards: [7], schemaPrefix: SHARDS, dialect: 'mysql8' })
  await poolA.query(`CREATE DATABASE ${LOG}`)
  const [me] = await rows<{ host: string; port: string }>(
    poolB,
    'SELECT @@hostname AS host, @@port AS port',
  )
  destination = `server ${me!.host}:${me!.port}`
})

afterAll(async () => {
  await dropDatabases(poolA, PREFIX)
  for (const pool of [poolA, poolB, adminA, adminB]) await pool.end()
  await second.stop()
})

/** The counter value (ID space) an instagram ID was made from: time << 10 | sequence. */
const counterValue = (id: bigint) => ((id >> 23n) << 10n) | (id & 1023n)
const db = (shard: number) => `\`${SHARDS}${shard}\``

async function counter(pool: Pool, shard: number): Promise<bigint> {
  const [row] = await rows<{ v: string }>(
    pool,
    `SELECT CAST(v AS CHAR) AS v FROM ${db(shard)}.sf_counter`,
  )
  return BigInt(row!.v)
}

async function meta(pool: Pool, shard: number): Promise<Record<string, string>> {
  const found = await rows<{ name: string; value: string }>(
    pool,
    `SELECT name, value FROM ${db(shard)}.sf_meta`,
  )
  return Object.fromEntries(found.map((row) => [row.name, row.value]))
}

/** IDs from what `query()` resolved to, for a SELECT, INSERT ... RETURNING or CALL (column `id`). */
function idsOf(queried: unknown): bigint[] {
  let list = (queried as unknown[])[0]
  // A CALL returns its result sets, then a status.
  if (Array.isArray(list) && Array.isArray(list[0])) list = list[0]
  return (list as { id: unknown }[]).map((row) => BigInt(String(row.id)))
}

/** The error of a statement that must fail. */
async function failure(
  on: Pick<Pool, 'query'>,
  sql: string,
): Promise<{ sqlState?: string; sqlMessage?: string; code?: string }> {
  const error = await on.query(sql).then(
    () => undefined,
    (e: unknown) => e as { sqlState?: string; sqlMessage?: string; code?: string },
  )
  expect(error, `${sql} should fail`).toBeDefined()
  return error!
}

/** The message a fenced routine of `shard` signals. */
const movedSignal = (shard: number) =>
  new RegExp(
    `^shardflake: logical shard ${shard} moved to server [^:]+:${second.port}; update the shard map$`,
  )

describe('moveMysqlShards: the reviewer scenario (a burst far ahead of the clock on A, then B)', () => {
  it('B continues above everything A issued: zero repeats', async () => {
    // B holds the shard already, installed fresh: its counter starts at its clock.
    await installMysql(poolB, {
      sharding,
      shards: [5],
      schemaPrefix: SHARDS,
      maxDriftMs: 60_000,
    })
    // 20 bursts of 1,000,000 values: A's counter runs ~19.5 s ahead of the clock.
    const firsts: bigint[] = []
    for (let i = 0; i < 20; i++) {
      const [row] = await rows<{ v: string }>(
        poolA,
        `SELECT CAST(${db(5)}.reserve_ids(1000000) AS CHAR) AS v`,
      )
      firsts.push(BigInt(row!.v))
    }
    const lo = firsts[0]!
    const hi = firsts[19]! + 999_999n
    // The gap: B's clock is far inside A's burst, so a fresh B would issue A's values again.
    const [clockB] = await rows<{ v: string }>(
      poolB,
      `SELECT CAST((FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) - ${layout.epoch}) << 10 AS CHAR) AS v`,
    )
    expect(BigInt(clockB!.v) < hi - 10_000n * 1024n).toBe(true)
    expect(await counter(poolB, 5)).toBe(0n)

    const progress: MoveProgress[] = []
    const result = await moveMysqlShards({
      from: adminA,
      to: adminB,
      sharding,
      shards: [5],
      schemaPrefix: SHARDS,
      maxDriftMs: 60_000,
      onProgress: (p) => progress.push(p),
    })
    expect(result.dialect).toBe('mariadb')
    const [moved] = result.shards
    expect(moved).toMatchObject({ shard: 5, resumed: false, fencedAt: hi + 1n })
    expect(moved!.aheadMs).toBeGreaterThan(15_000)
    expect(progress).toEqual([{ done: 1, total: 1, shard: 5, fencedAt: hi + 1n }])
    // A's counter is fenced past the end of the layout, keeping L; B's stands at L.
    expect(await counter(poolA, 5)).toBe(hi + 1n + LIMIT + 1n)
    expect(await counter(poolB, 5)).toBe(hi + 1n)
    const recorded = await meta(poolA, 5)
    expect(recorded.moved_to).toBe(destination)
    expect(recorded.moved_fence).toBe(String(hi + 1n))
    expect(recorded.moved_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(recorded.move_id).toMatch(/^[0-9a-f-]{36}$/)
    expect((await meta(poolB, 5)).arrived_by).toBe(recorded.move_id)

    // The shard map now says B for shard 5: 30,000 IDs from there, and some in SQL.
    const after = new MysqlSource({
      sharding,
      schemaPrefix: SHARDS,
      databases: new ShardMap(sharding, [
        { from: 0, to: 4, target: poolA },
        { from: 5, to: 5, target: poolB },
        { from: 6, to: 9, target: poolA },
      ]),
    })
    const fresh: bigint[] = []
    for (let i = 0; i < 30; i++) fresh.push(...(await after.nextIds(5, 1000)))
    fresh.push(...idsOf(await poolB.query(`CALL ${db(5)}.next_ids(500)`)))
    fresh.push(...idsOf(await poolB.query(`SELECT ${db(5)}.next_id() AS id FROM seq_1_to_100`)))
    expect(fresh.filter((id) => counterValue(id) >= lo && counterValue(id) <= hi)).toHaveLength(0)
    for (const id of fresh) expect(counterValue(id) > hi).toBe(true)
    expect(new Set(fresh).size).toBe(30_600)

    // The old map, still pointing at A, gets a clear error, not IDs.
    const before = new MysqlSource({ sharding, schemaPrefix: SHARDS, databases: poolA })
    const stale = await before.nextIds(5, 10).catch((e: unknown) => e)
    expect(stale).toBeInstanceOf(ShardMovedError)
    expect(stale).toMatchObject({ code: 'SHARD_MOVED', shard: 5 })
    expect((stale as Error).message).toMatch(
      /^Logical shard 5 \(database .*\) moved to another server .*the shard map still sends logical shard 5 there.*moved to server .*; update the shard map/,
    )
  })
})

describe.each([
  { shard: 6, engine: 'Aria' },
  { shard: 7, engine: 'InnoDB' },
])(
  'moveMysqlShards under concurrent draws on A (shard $shard, $engine counter)',
  ({ shard, engine }) => {
    const table = `${LOG}.hammer_${shard}`
    const triggered = `${LOG}.trig_${shard}`
    const fromA: bigint[] = []
    const fromB: bigint[] = []
    let fence = 0n

    it('draws on A during the move succeed below L or fail MOVED; B issues from L up; all distinct', async () => {
      await poolA.query(`CREATE TABLE ${table} (id BIGINT PRIMARY KEY, session INT NOT NULL)`)
      await poolA.query(
        `CREATE TABLE ${triggered} (id BIGINT NOT NULL DEFAULT 0 PRIMARY KEY, note VARCHAR(10))`,
      )
      await runDdl(
        poolA,
        mysqlTriggerSql({
          sharding,
          schemaPrefix: SHARDS,
          database: `${PREFIX}log`,
          table: `trig_${shard}`,
          shard,
        }),
      )
      await poolA.query(`INSERT INTO ${triggered} (note) VALUES ('before'), ('before')`)
      fromA.push(...idsOf(await poolA.query(`SELECT id FROM ${triggered}`)))
      // MysqlSource drawers on their own pool (no prefetch: every call reaches the server).
      const sourcePool = createPool(MYSQL_URL, { connectionLimit: 4 })
      const source = new MysqlSource({ sharding, schemaPrefix: SHARDS, databases: sourcePool })
      const refusals = new Map<string, number>()
      const inserted: bigint[] = []
      let rounds = 0
      let moving: ReturnType<typeof moveMysqlShards> | undefined
      let moveFailed = false
      try {
        const sessions = Array.from({ length: 8 }, async (_, session) => {
          const connection: PoolConnection = await poolA.getConnection()
          const got: bigint[] = []
          let refused = 0
          try {
            for (let round = 0; refused < 3 && !moveFailed; round++) {
              const op = (round + session) % 6
              try {
                if (op === 0) {
                  got.push(
                    ...idsOf(
                      await connection.query(
                        `SELECT CAST(${db(shard)}.next_id() AS CHAR) AS id FROM seq_1_to_50`,
                      ),
                    ),
                  )
                } else if (op === 1) {
                  got.push(...idsOf(await connection.query(`CALL ${db(shard)}.next_ids(7)`)))
                } else if (op === 2) {
                  got.push(...idsOf(await connection.query(`CALL ${db(shard)}.next_ids(1500)`)))
                } else if (op === 3) {
                  const ids = idsOf(
                    await connection.query(
                      `INSERT INTO ${table} (id, session) SELECT ${db(shard)}.next_id(), ${session} FROM seq_1_to_20 RETURNING id`,
                    ),
                  )
                  got.push(...ids)
                  inserted.push(...ids)
                } else if (op === 4) {
                  await connection.query(
                    `CALL ${db(shard)}.generate_id(${shard + 8192 * (round + 1)}, @id)`,
                  )
                  got.push(...idsOf(await connection.query('SELECT CAST(@id AS CHAR) AS id')))
                } else {
                  got.push(...(await source.nextIds(shard, 100)))
                }
              } catch (error) {
                const e = error as { sqlState?: string; sqlMessage?: string; message?: string }
                const refusal =
                  error instanceof ShardMovedError
                    ? /update the shard map/.test(e.message ?? '') && 'source: MOVED'
                    : e.sqlState === SIGNALS.MOVED && movedSignal(shard).test(e.sqlMessage ?? '')
                      ? 'sql: MOVED'
                      : e.sqlState === SIGNALS.MOVED &&
                          /^shardflake: logical shard \d+ moved to another server \(sf_meta\.moved_to\)/.test(
                            e.sqlMessage ?? '',
                          )
                        ? 'sql: MOVED (counter)'
                        : undefined
                if (!refusal) throw error
                refusals.set(refusal, (refusals.get(refusal) ?? 0) + 1)
                refused++
              }
              rounds++
              // The move starts once every session is drawing.
              if (rounds === 8 * 20 && !moving) {
                moving = moveMysqlShards({
                  from: adminA,
                  to: adminB,
                  sharding,
                  shards: [shard],
                  schemaPrefix: SHARDS,
                })
                moving.catch(() => {
                  moveFailed = true
                })
              }
            }
          } finally {
            connection.release()
          }
          return got
        })
        for (const got of await Promise.all(sessions)) for (const id of got) fromA.push(id)
      } finally {
        await sourcePool.end()
      }
      const result = await moving!
      fence = result.shards[0]!.fencedAt
      expect(result.shards[0]!.resumed).toBe(false)
      // Every session drew before the fence and was refused three times after it, with MOVED.
      expect(fromA.length).toBeGreaterThan(8 * 20 * 50)
      expect([...refusals.values()].reduce((a, b) => a + b, 0)).toBe(8 * 3)
      expect(refusals.get('sql: MOVED')).toBeGreaterThan(0)
      // Nothing A issued reached L; A's counter is fenced at L; B's is at L or above.
      for (const id of fromA) expect(counterValue(id) < fence).toBe(true)
      expect(await counter(poolA, shard)).toBe(fence + LIMIT + 1n)
      expect(await counter(poolB, shard)).toBeGreaterThanOrEqual(fence)
      // B keeps A's counter engine.
      const [table2] = await rows<{ e: string }>(
        poolB,
        `SELECT ENGINE AS e FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${SHARDS}${shard}' AND TABLE_NAME = 'sf_counter'`,
      )
      expect(table2!.e).toBe(engine)
      const onB = new MysqlSource({ sharding, schemaPrefix: SHARDS, databases: poolB })
      for (let i = 0; i < 10; i++) fromB.push(...(await onB.nextIds(shard, 1000)))
      fromB.push(
        ...idsOf(await poolB.query(`SELECT ${db(shard)}.next_id() AS id FROM seq_1_to_500`)),
      )
      for (const id of fromB) expect(counterValue(id) >= fence).toBe(true)
      const all = [...fromA, ...fromB]
      expect(new Set(all).size).toBe(all.length)
      // The rows inserted on A are exactly the IDs the inserts returned.
      const [count] = await rows<{ n: string; d: string }>(
        poolA,
        `SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM ${table}`,
      )
      expect(count).toEqual({ n: String(inserted.length), d: String(inserted.length) })
      // The move let go of its locks and restored its sessions.
      for (const pool of [adminA, adminB]) {
        const [state] = await rows<{ free: number; wait: string; global: string }>(
          pool,
          `SELECT IS_FREE_LOCK('sf_move_${SHARDS}${shard}') AS free, @@SESSION.lock_wait_timeout AS wait, @@GLOBAL.lock_wait_timeout AS global`,
        )
        expect(Number(state!.free)).toBe(1)
        expect(String(state!.wait)).toBe(String(state!.global))
      }
    })

    it('A refuses afterwards: next_id() in SELECT and INSERT, next_ids(n), generate_id, reserve_ids, the trigger', async () => {
      for (const sql of [
        `SELECT ${db(shard)}.next_id()`,
        `INSERT INTO ${table} (id, session) VALUES (${db(shard)}.next_id(), 99)`,
        `CALL ${db(shard)}.next_ids(3)`,
        `CALL ${db(shard)}.next_ids(5000)`,
        `CALL ${db(shard)}.generate_id(${shard}, @x)`,
        `SELECT ${db(shard)}.reserve_ids(1)`,
        `INSERT INTO ${triggered} (note) VALUES ('after')`,
      ]) {
        const error = await failure(poolA, sql)
        expect(error.sqlState).toBe(SIGNALS.MOVED)
        expect(error.sqlMessage).toMatch(movedSignal(shard))
      }
      expect(await counter(poolA, shard)).toBe(fence + LIMIT + 1n)
      const [rowsAfter] = await rows<{ n: string }>(
        poolA,
        `SELECT COUNT(*) AS n FROM ${triggered} WHERE note = 'after'`,
      )
      expect(rowsAfter!.n).toBe('0')
    })

    it('re-installing the moved shard on A is refused (installer); statement by statement it stays fenced', async () => {
      const error = await installMysql(poolA, {
        sharding,
        shards: [shard],
        schemaPrefix: SHARDS,
      }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ShardMovedError)
      expect((error as Error).message).toMatch(
        new RegExp(
          `Logical shard ${shard} .* moved from this server to another one \\(server .*:${second.port}, `,
        ),
      )
      // The generated statements run the way `mariadb --force` runs a script: errors skipped.
      const failed: string[] = []
      for (const statement of mysqlShardStatements(
        { sharding, schemaPrefix: SHARDS, dialect: shard === 7 ? 'mysql8' : 'mariadb' },
        shard,
      )) {
        await poolA.query(statement).catch((e: { sqlMessage?: string }) => {
          failed.push(e.sqlMessage ?? '')
        })
      }
      expect(failed).toEqual([
        `shardflake: logical shard ${shard} moved from this server to another (sf_meta.moved_to); move it back instead`,
      ])
      // The routines are live again, but the counter is not: still nothing is issued.
      for (const sql of [`SELECT ${db(shard)}.next_id()`, `CALL ${db(shard)}.next_ids(3)`]) {
        const revived = await failure(poolA, sql)
        expect(revived.sqlMessage).toBe(
          `shardflake: logical shard ${shard} moved to another server (sf_meta.moved_to); update the shard map`,
        )
      }
      expect(await counter(poolA, shard)).toBe(fence + LIMIT + 1n)
    })

    it('running the move again is safe: it resumes, the fence stays, B never moves back', async () => {
      const before = await counter(poolB, shard)
      const again = await moveMysqlShards({
        from: adminA,
        to: adminB,
        sharding,
        shards: [shard],
        schemaPrefix: SHARDS,
      })
      expect(again.shards[0]).toMatchObject({ shard, fencedAt: fence, resumed: true })
      expect(await counter(poolA, shard)).toBe(fence + LIMIT + 1n)
      expect(await counter(poolB, shard)).toBeGreaterThanOrEqual(before)
      // The routines A got back above are fenced again.
      expect((await failure(poolA, `SELECT ${db(shard)}.next_id()`)).sqlMessage).toMatch(
        movedSignal(shard),
      )
      fromB.push(...idsOf(await poolB.query(`CALL ${db(shard)}.next_ids(2000)`)))
      const all = [...fromA, ...fromB]
      expect(new Set(all).size).toBe(all.length)
    })

    it('moving it back to A lifts A’s fence; A continues above B’s', async () => {
      const back = await moveMysqlShards({
        from: adminB,
        to: adminA,
        sharding,
        shards: [shard],
        schemaPrefix: SHARDS,
      })
      const fenceB = back.shards[0]!.fencedAt
      expect(fenceB > fence).toBe(true)
      for (const id of fromB) expect(counterValue(id) < fenceB).toBe(true)
      const onA = await meta(poolA, shard)
      expect(onA.moved_to).toBeUndefined()
      expect(onA.moved_fence).toBeUndefined()
      expect(onA.move_id).toBeUndefined()
      expect(onA.arrived_by).toBe((await meta(poolB, shard)).move_id)
      expect((await meta(poolB, shard)).moved_fence).toBe(String(fenceB))
      expect(await counter(poolA, shard)).toBe(fenceB)
      const again = idsOf(await poolA.query(`CALL ${db(shard)}.next_ids(3000)`))
      again.push(...idsOf(await poolA.query(`SELECT ${db(shard)}.next_id() AS id`)))
      await poolA.query(`INSERT INTO ${triggered} (note) VALUES ('back')`)
      again.push(...idsOf(await poolA.query(`SELECT id FROM ${triggered} WHERE note = 'back'`)))
      for (const id of again) expect(counterValue(id) >= fenceB).toBe(true)
      const all = [...fromA, ...fromB, ...again]
      expect(new Set(all).size).toBe(all.length)
      expect((await failure(poolB, `SELECT ${db(shard)}.next_id()`)).sqlMessage).toMatch(
        /^shardflake: logical shard \d+ moved to server /,
      )
      // A may be (re)installed again: it is the shard's home.
      const reinstalled = await installMysql(poolA, {
        sharding,
        shards: [shard],
        schemaPrefix: SHARDS,
        dialect: shard === 7 ? 'mysql8' : 'mariadb',
      })
      expect(reinstalled.updated).toEqual([shard])
      expect(await counter(poolA, shard)).toBeGreaterThanOrEqual(fenceB)
    })
  },
)

describe('a stored procedure keeps the routine bodies it has called (why the counter is fenced too)', () => {
  const gate = `${PREFIX}gate`

  async function startGatedCall(shard: number): Promise<{
    call: Promise<unknown>
    release: () => Promise<void>
    holder: PoolConnection
  }> {
    await poolA.query(
      `CREATE TABLE IF NOT EXISTS ${LOG}.slip (id BIGINT NOT NULL, shard INT NOT NULL, step INT NOT NULL)`,
    )
    await poolA.query(`CREATE OR REPLACE PROCEDURE ${LOG}.slip_${shard}()
BEGIN
  INSERT INTO ${LOG}.slip (id, shard, step) VALUES (${db(shard)}.next_id(), ${shard}, 1);
  DO GET_LOCK('${gate}', 60);
  DO RELEASE_LOCK('${gate}');
  INSERT INTO ${LOG}.slip (id, shard, step) VALUES (${db(shard)}.next_id(), ${shard}, 2);
END`)
    const holder = await poolA.getConnection()
    await holder.query(`SELECT GET_LOCK('${gate}', 0)`)
    const caller = await poolA.getConnection()
    const [who] = await caller.query('SELECT CONNECTION_ID() AS id')
    const callerId = Number((who as { id: unknown }[])[0]!.id)
    const call = caller.query(`CALL ${LOG}.slip_${shard}()`).finally(() => caller.release())
    call.catch(() => undefined)
    // Wait until the procedure has drawn once and waits at the gate.
    for (let i = 0; i < 200; i++) {
      const [row] = await rows<{ state: string | null }>(
        poolA,
        'SELECT STATE AS state FROM information_schema.PROCESSLIST WHERE ID = ?',
        [callerId],
      )
      if (row?.state === 'User lock') break
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    const release = async () => {
      await holder.query(`SELECT RELEASE_LOCK('${gate}')`)
      holder.release()
    }
    return { call, release, holder }
  }

  async function slipRows(shard: number) {
    const found = await rows<{ id: string; step: number }>(
      poolA,
      `SELECT CAST(id AS CHAR) AS id, step FROM ${LOG}.slip WHERE shard = ? ORDER BY step`,
      [shard],
    )
    return found.map((row) => ({ id: BigInt(row.id), step: Number(row.step) }))
  }

  it('replacing the routines alone does not stop a CALL in flight: its cached next_id() still draws', async () => {
    const gated = await startGatedCall(8)
    // Only the routine part of the fence (no counter fence): it does not wait for the CALL.
    const routinesOnly = fenceSql({ sharding, schemaPrefix: SHARDS }, 8, destination).filter(
      (statement) => !/sf_counter/.test(statement),
    )
    for (const statement of routinesOnly) await poolA.query(statement)
    expect((await failure(poolA, `SELECT ${db(8)}.next_id()`)).sqlMessage).toMatch(movedSignal(8))
    await gated.release()
    await gated.call
    const found = await slipRows(8)
    expect(found.map((row) => row.step)).toEqual([1, 2])
    // The second draw ran the old body after the routines were replaced.
    expect(counterValue(found[1]!.id) > counterValue(found[0]!.id)).toBe(true)
    // Completing the move from here: L covers that draw too.
    const result = await moveMysqlShards({
      from: adminA,
      to: adminB,
      sharding,
      shards: [8],
      schemaPrefix: SHARDS,
    })
    expect(result.shards[0]!.resumed).toBe(true)
    expect(counterValue(found[1]!.id) < result.shards[0]!.fencedAt).toBe(true)
    const [first] = idsOf(await poolB.query(`SELECT ${db(8)}.next_id() AS id`))
    expect(counterValue(first!) >= result.shards[0]!.fencedAt).toBe(true)
  })

  it('with the counter fenced, that cached body finds no room: the CALL fails MOVED, nothing is issued', async () => {
    const gated = await startGatedCall(9)
    const result = await moveMysqlShards({
      from: adminA,
      to: adminB,
      sharding,
      shards: [9],
      schemaPrefix: SHARDS,
    })
    const fenceValue = result.shards[0]!.fencedAt
    await gated.release()
    const error = (await gated.call.then(
      () => undefined,
      (e: unknown) => e,
    )) as { sqlMessage?: string } | undefined
    expect(error?.sqlMessage).toBe(
      'shardflake: logical shard 9 moved to another server (sf_meta.moved_to); update the shard map',
    )
    const found = await slipRows(9)
    expect(found.map((row) => row.step)).toEqual([1])
    expect(counterValue(found[0]!.id) < fenceValue).toBe(true)
    expect(await counter(poolA, 9)).toBe(fenceValue + LIMIT + 1n)
  })
})

describe('moveMysqlShards: crash half-way, locks, and refusals', () => {
  it('resumes after a crash between the counter fence and the arrival (mysql8 fence statements)', async () => {
    await poolA.query(`CALL ${db(3)}.next_ids(300)`)
    const statements = fenceSql(
      { sharding, schemaPrefix: SHARDS, dialect: 'mysql8' },
      3,
      destination,
    )
    // Everything up to and including the counter fence; L is not recorded yet.
    const upTo = statements.findIndex((statement) => statement.startsWith('UPDATE'))
    for (const statement of statements.slice(0, upTo + 1)) await poolA.query(statement)
    const fenced = await counter(poolA, 3)
    expect(fenced > LIMIT).toBe(true)
    expect((await meta(poolA, 3)).moved_fence).toBeUndefined()
    expect((await failure(poolA, `SELECT ${db(3)}.next_id()`)).sqlMessage).toMatch(movedSignal(3))
    const [absent] = await rows<{ n: string }>(
      poolB,
      `SELECT COUNT(*) AS n FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '${SHARDS}3'`,
    )
    expect(absent!.n).toBe('0')
    const result = await moveMysqlShards({
      from: adminA,
      to: adminB,
      sharding,
      shards: '3',
      schemaPrefix: SHARDS,
    })
    expect(result.shards[0]).toMatchObject({
      shard: 3,
      resumed: true,
      fencedAt: fenced - LIMIT - 1n,
    })
    expect((await meta(poolA, 3)).moved_fence).toBe(String(fenced - LIMIT - 1n))
    const [first] = idsOf(await poolB.query(`SELECT ${db(3)}.next_id() AS id`))
    expect(counterValue(first!) >= fenced - LIMIT - 1n).toBe(true)
  })

  it('waits for an open transaction that drew from the shard, up to lockTimeoutMs, changing nothing', async () => {
    const holder = await poolA.getConnection()
    try {
      await holder.query('START TRANSACTION')
      await holder.query(`SELECT ${db(2)}.next_id()`)
      const error = await moveMysqlShards({
        from: adminA,
        to: adminB,
        sharding,
        shards: [2],
        schemaPrefix: SHARDS,
        lockTimeoutMs: 1000,
      }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockTimeoutError)
      expect((error as Error).message).toMatch(
        /shard 2: a lock was not granted within lockTimeoutMs.*Nothing of this shard was changed/,
      )
      // The open transaction goes on drawing; the shard is untouched.
      await holder.query(`SELECT ${db(2)}.next_id()`)
      await holder.query('COMMIT')
    } finally {
      holder.release()
    }
    expect((await meta(poolA, 2)).moved_to).toBeUndefined()
    expect(await counter(poolA, 2)).toBeLessThanOrEqual(LIMIT)
    const [row] = idsOf(await poolA.query(`SELECT ${db(2)}.next_id() AS id`))
    expect(layout.shardOf(row!)).toBe(2)
  })

  it('refuses the same server, shards not on from, other layouts, a shard moved elsewhere and hostile names, changing nothing', async () => {
    const base = { sharding, schemaPrefix: SHARDS }
    const identical = await moveMysqlShards({
      ...base,
      from: adminA,
      to: adminA,
      shards: [1],
    }).catch((e: unknown) => e)
    expect(identical).toBeInstanceOf(ConfigurationError)
    const sameServer = createPool(MYSQL_URL, { connectionLimit: 1 })
    try {
      const same = await moveMysqlShards({
        ...base,
        from: adminA,
        to: sameServer,
        shards: [1],
      }).catch((e: unknown) => e)
      expect(same).toBeInstanceOf(ConfigurationError)
      expect((same as Error).message).toMatch(/same server \(two connections to it\)/)
    } finally {
      await sameServer.end()
    }
    const missing = await moveMysqlShards({
      ...base,
      from: adminA,
      to: adminB,
      shards: '1-2,42,44',
    }).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(ConfigurationError)
    expect((missing as Error).message).toMatch(/shard\(s\) 42,44 not installed .* old server/)
    const other = defineLayout({
      name: 'other',
      epoch: '2024-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const otherSharding = defineSharding({ layout: other, logicalShards: 8192 })
    const wrongLayout = await moveMysqlShards({
      ...base,
      sharding: otherSharding,
      from: adminA,
      to: adminB,
      shards: [1],
    }).catch((e: unknown) => e)
    expect(wrongLayout).toBeInstanceOf(ShardingMismatchError)
    expect((wrongLayout as Error).message).toMatch(/old server \(from\)/)
    // B holds shard 1 with another layout.
    await installMysql(poolB, { sharding: otherSharding, shards: [1], schemaPrefix: SHARDS })
    const mismatch = await moveMysqlShards({
      ...base,
      from: adminA,
      to: adminB,
      shards: [1],
    }).catch((e: unknown) => e)
    expect(mismatch).toBeInstanceOf(ShardingMismatchError)
    expect((mismatch as Error).message).toMatch(/on the new server \(to\) uses layout "other"/)
    expect(await counter(poolB, 1)).toBe(0n)
    // Shard 4 was moved to a third server (recorded on A): moving it from A to B is refused.
    for (const statement of fenceSql(base, 4, 'server elsewhere:3306')) {
      await poolA.query(statement)
    }
    const elsewhere = await moveMysqlShards({
      ...base,
      from: adminA,
      to: adminB,
      shards: [4],
    }).catch((e: unknown) => e)
    expect(elsewhere).toBeInstanceOf(ShardMovedError)
    expect((elsewhere as Error).message).toMatch(
      /shard 4 moved from the old server \(from\) to server elsewhere:3306 .*already, not to server .*: move it from there/,
    )
    // Shard 0 moved A -> B, then on from B to a third server (recorded on B): running the A -> B
    // move again must not bring it back to life on B.
    await moveMysqlShards({ ...base, from: adminA, to: adminB, shards: [0] })
    for (const statement of fenceSql(base, 0, 'server third:3306')) {
      await poolB.query(statement)
    }
    const fencedB = await counter(poolB, 0)
    const stale = await moveMysqlShards({ ...base, from: adminA, to: adminB, shards: [0] }).catch(
      (e: unknown) => e,
    )
    expect(stale).toBeInstanceOf(ShardMovedError)
    expect((stale as Error).message).toMatch(
      /shard 0 moved on from the new server \(to\) to server third:3306 on .*, after this move had brought it there/,
    )
    expect(await counter(poolB, 0)).toBe(fencedB)
    expect((await meta(poolB, 0)).moved_to).toBe('server third:3306')
    expect((await failure(poolB, `SELECT ${db(0)}.next_id()`)).sqlMessage).toBe(
      'shardflake: logical shard 0 moved to server third:3306; update the shard map',
    )
    for (const bad of ['x`; DROP TABLE t; --', 'Shard', 'a b', '']) {
      await expect(
        moveMysqlShards({ ...base, schemaPrefix: bad, from: adminA, to: adminB, shards: [1] }),
      ).rejects.toBeInstanceOf(InvalidIdentifierError)
    }
    await expect(
      moveMysqlShards({ ...base, from: adminA, to: adminB, shards: [1], lockTimeoutMs: 0 }),
    ).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(
      moveMysqlShards({
        ...base,
        from: adminA,
        to: adminB,
        shards: [2],
        dialect: 'mysql8',
        counterEngine: 'Aria',
      }),
    ).rejects.toBeInstanceOf(InvalidArgumentError)
    expect((await meta(poolA, 2)).moved_to).toBeUndefined()
    expect(() => fenceSql(base, 1, 'a\nb')).toThrow(InvalidArgumentError)
    // Shard 1 still lives on A, and only there; B never got shards 1 or 4 (in this layout).
    expect((await meta(poolA, 1)).moved_to).toBeUndefined()
    await poolA.query(`SELECT ${db(1)}.next_id()`)
    const onB = await rows<{ name: string }>(
      poolB,
      `SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ('${SHARDS}1', '${SHARDS}4')`,
    )
    expect(onB.map((row) => row.name)).toEqual([`${SHARDS}1`])
    expect((await meta(poolB, 1)).layout_key).toMatch(/^epoch=1704067200000;/)
  })
})
