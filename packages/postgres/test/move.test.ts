import {
  ConfigurationError,
  defineLayout,
  defineSharding,
  InvalidIdentifierError,
  instagram,
  LockTimeoutError,
  ShardingMismatchError,
  ShardMap,
  ShardMovedError,
} from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import {
  fenceSql,
  installPostgres,
  type MoveProgress,
  movePostgresShards,
  PostgresSource,
  postgresSql,
  readInstalledShards,
  type SqlClient,
} from '../src/index'
import { resolveSqlOptions } from '../src/sql/options'
import { createDatabase, dropDatabase, raw, sharding } from './helpers'

/**
 * Moving logical shards between two databases (two servers when the global setup could start a
 * second one): the old home is fenced, the new one continues above the fence, and no ID is ever
 * issued twice — under concurrent draws on the old home, after a burst ahead of the clock, when
 * run again, and when moved back. Every ID is collected and counted; state is read back raw.
 */
const DB_A = 'sf_pg_move_a'
const DB_B = 'sf_pg_move_b'
const DB_C = 'sf_pg_move_c'
const secondServer = inject('secondServerUrl')
let urlA: string
let urlB: string
let urlC: string
let poolA: pg.Pool
let poolB: pg.Pool
/** The move's own connections (the drawers' pools may be busy). */
let adminA: pg.Pool
let adminB: pg.Pool

const pool = (url: string, max: number) => {
  const p = new pg.Pool({ connectionString: url, max })
  p.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
  return p
}

beforeAll(async () => {
  urlA = await createDatabase(DB_A)
  urlB = await createDatabase(DB_B, secondServer)
  urlC = await createDatabase(DB_C)
  poolA = pool(urlA, 12)
  poolB = pool(urlB, 12)
  adminA = pool(urlA, 2)
  adminB = pool(urlB, 2)
  await installPostgres(poolA, { sharding, shards: '0-9' })
  await installPostgres(poolA, { sharding, shards: [7, 17], cache: 100 })
})
afterAll(async () => {
  for (const p of [poolA, poolB, adminA, adminB]) await p.end()
  await dropDatabase(DB_A)
  await dropDatabase(DB_B, secondServer)
  await dropDatabase(DB_C)
})

/** The sequence value (ID space) an instagram ID was made from: time << 10 | sequence. */
const sequenceValue = (id: bigint) => ((id >> 23n) << 10n) | (id & 1023n)
const ids = (rows: { id: string }[]) => rows.map((row) => BigInt(row.id))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function seqState(url: string, shard: number) {
  const [row] = await raw<{ last: string; max: string }>(
    url,
    `SELECT (SELECT last_value FROM shard_${shard}.id_seq)::text AS last,
       (SELECT seqmax FROM pg_sequence WHERE seqrelid = 'shard_${shard}.id_seq'::regclass)::text AS max`,
  )
  return { last: BigInt(row!.last), max: BigInt(row!.max) }
}

async function shardRow(url: string, shard: number) {
  const [row] = await raw<{ retired: boolean; moved_to: string | null; fence: string | null }>(
    url,
    `SELECT retired_at IS NOT NULL AS retired, moved_to, fence_value::text AS fence FROM shardflake.shards WHERE shard = $1`,
    [shard],
  )
  return row
}

/** The SQLSTATE of a statement that must fail. */
async function failure(url: string, sql: string): Promise<{ code: string; message: string }> {
  const error = await raw(url, sql).then(
    () => undefined,
    (e: unknown) => e as { code: string; message: string },
  )
  expect(error, `${sql} should fail`).toBeDefined()
  return { code: error!.code, message: error!.message }
}

describe('movePostgresShards: the reviewer scenario (a burst ahead of the clock on A, then B)', () => {
  it('runs on two different servers when the global setup could start one', async () => {
    const [a] = await raw<{ port: number }>(urlA, `SELECT current_setting('port')::int AS port`)
    const [b] = await raw<{ port: number }>(urlB, `SELECT current_setting('port')::int AS port`)
    expect(b!.port).not.toBe(a!.port)
  })

  it('B continues above everything A issued: zero repeats', async () => {
    // B holds the shard already, installed where the sequence starts at the clock.
    await installPostgres(poolB, { sharding, shards: [5] })
    const [burst] = await raw<{ lo: string; hi: string; n: number }>(
      urlA,
      'SELECT min(x)::text AS lo, max(x)::text AS hi, count(*)::int AS n FROM shard_5.next_ids(1000000) AS x',
    )
    expect(burst!.n).toBe(1_000_000)
    const hi = sequenceValue(BigInt(burst!.hi))
    const lo = sequenceValue(BigInt(burst!.lo))
    const progress: MoveProgress[] = []
    const result = await movePostgresShards({
      from: adminA,
      to: adminB,
      sharding,
      shards: [5],
      onProgress: (p) => progress.push(p),
    })
    const [moved] = result.shards
    expect(moved!.shard).toBe(5)
    expect(moved!.resumed).toBe(false)
    expect(progress).toEqual([{ done: 1, total: 1, shard: 5, fencedAt: moved!.fencedAt }])
    // L covers the burst; A's sequence can no longer pass it, B's stands at or above it.
    expect(moved!.fencedAt >= hi).toBe(true)
    expect(await seqState(urlA, 5)).toEqual({ last: hi, max: moved!.fencedAt })
    expect((await seqState(urlB, 5)).last).toBe(moved!.fencedAt)
    const row = await shardRow(urlA, 5)
    expect(row!.retired).toBe(true)
    expect(row!.fence).toBe(moved!.fencedAt.toString())
    expect(row!.moved_to).toMatch(/^database sf_pg_move_b/)

    // The shard map now says B; 30,000 IDs from there.
    const after = new PostgresSource({
      sharding,
      databases: new ShardMap<SqlClient>(sharding, [
        { from: 0, to: 4, target: poolA },
        { from: 5, to: 5, target: poolB },
        { from: 6, to: 9, target: poolA },
      ]),
    })
    const fresh: bigint[] = []
    for (let i = 0; i < 30; i++) fresh.push(...(await after.nextIds(5, 1000)))
    const inBurst = fresh.filter((id) => sequenceValue(id) >= lo && sequenceValue(id) <= hi)
    expect(inBurst).toHaveLength(0)
    for (const id of fresh) expect(sequenceValue(id) > moved!.fencedAt).toBe(true)
    expect(new Set(fresh).size).toBe(30_000)

    // The old map still pointing at A gets a clear error, not IDs.
    const before = new PostgresSource({ sharding, databases: poolA })
    const stale = await before.nextIds(5, 10).catch((e: unknown) => e)
    expect(stale).toBeInstanceOf(ShardMovedError)
    expect(stale).toMatchObject({ code: 'SHARD_MOVED', shard: 5 })
    expect((stale as Error).message).toMatch(/logical shard 5 moved to another database/)
  })
})

describe.each([
  { shard: 6, cache: 1 },
  { shard: 7, cache: 100 },
])(
  'movePostgresShards under concurrent draws on A (shard $shard, CACHE $cache)',
  ({ shard, cache }) => {
    const table = `hammer_${shard}`
    const fromA: bigint[] = []
    const fromB: bigint[] = []
    let fence = 0n

    it('draws on A during the move succeed at or below L or fail with SF005; B issues above L; all distinct', async () => {
      await raw(
        urlA,
        `CREATE TABLE ${table} (id bigint PRIMARY KEY DEFAULT shard_${shard}.next_id(), session int NOT NULL)`,
      )
      const { reserveFrom } = resolveSqlOptions({ sharding })
      const codes = new Map<string, number>()
      const boundErrors: string[] = []
      const inserted: bigint[] = []
      let rounds = 0
      let moving: Promise<unknown> | undefined
      let moveFailed = false
      const sessions = Array.from({ length: 8 }, async (_, session) => {
        const client = await poolA.connect()
        const got: bigint[] = []
        let refused = 0
        try {
          for (let round = 0; refused < 3 && !moveFailed; round++) {
            const op = (round + session) % 5
            const sql =
              op === 0
                ? `SELECT shard_${shard}.next_id()::text AS id FROM generate_series(1, 50)`
                : op === 1
                  ? `SELECT x::text AS id FROM shard_${shard}.next_ids(7) x`
                  : op === 2
                    ? `SELECT x::text AS id FROM shard_${shard}.next_ids(${reserveFrom + 372}) x`
                    : op === 3
                      ? `INSERT INTO ${table} (session) SELECT ${session} FROM generate_series(1, 100) RETURNING id::text AS id`
                      : `SELECT shard_${shard}.next_id()::text AS id`
            try {
              const batch = ids((await client.query(sql)).rows)
              got.push(...batch)
              if (op === 3) inserted.push(...batch)
            } catch (error) {
              const code = String((error as { code?: unknown }).code)
              codes.set(code, (codes.get(code) ?? 0) + 1)
              refused++
              // A call already running when the fence committed may meet the sequence's end.
              if (code === '2200H' || code === '22003') boundErrors.push((error as Error).message)
              else if (code !== 'SF005') throw error
            }
            rounds++
            // The move starts once every session is drawing.
            if (rounds === 8 * 20 && !moving) {
              moving = movePostgresShards({ from: adminA, to: adminB, sharding, shards: [shard] })
              moving.catch(() => {
                moveFailed = true
              })
            }
          }
        } finally {
          client.release()
        }
        return got
      })
      fromA.push(...(await Promise.all(sessions)).flat())
      const result = (await moving) as Awaited<ReturnType<typeof movePostgresShards>>
      fence = result.shards[0]!.fencedAt
      // Every session drew before the fence and was refused after it: SF005, or, for a call that
      // was already running the old body, the sequence's bound at exactly L (never an ID above L).
      expect(fromA.length).toBeGreaterThan(8 * 20 * 20)
      expect([...codes.values()].reduce((a, b) => a + b, 0)).toBe(8 * 3)
      expect(codes.get('SF005')).toBeGreaterThan(0)
      for (const code of codes.keys()) expect(['SF005', '2200H', '22003']).toContain(code)
      for (const message of boundErrors) {
        expect(message).toMatch(new RegExp(`sequence "id_seq" \\((${fence}|0\\.\\.${fence})\\)`))
      }
      // Nothing A issued passed L; A's sequence cannot; B's is at L or above.
      for (const id of fromA) expect(sequenceValue(id) <= fence).toBe(true)
      expect((await seqState(urlA, shard)).max).toBe(fence)
      expect((await seqState(urlB, shard)).last >= fence).toBe(true)
      // B: its sequence cache is A's (the move keeps it), and every ID it issues is above L.
      const [seq] = await raw<{ cache: string }>(
        urlB,
        `SELECT seqcache::text AS cache FROM pg_sequence WHERE seqrelid = 'shard_${shard}.id_seq'::regclass`,
      )
      expect(seq!.cache).toBe(String(cache))
      const source = new PostgresSource({ sharding, databases: poolB })
      for (let i = 0; i < 10; i++) fromB.push(...(await source.nextIds(shard, 1000)))
      fromB.push(
        ...ids(
          await raw(
            urlB,
            `SELECT shard_${shard}.next_id()::text AS id FROM generate_series(1, 500)`,
          ),
        ),
      )
      for (const id of fromB) expect(sequenceValue(id) > fence).toBe(true)
      const all = [...fromA, ...fromB]
      expect(new Set(all).size).toBe(all.length)
      // The rows inserted on A are exactly the IDs the inserts returned.
      const [count] = await raw<{ n: string; d: string }>(
        urlA,
        `SELECT count(*)::text AS n, count(DISTINCT id)::text AS d FROM ${table}`,
      )
      expect(count).toEqual({ n: String(inserted.length), d: String(inserted.length) })
      for (const url of [urlA, urlB]) {
        const [locks] = await raw<{ n: string }>(
          url,
          `SELECT count(*)::text AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        )
        expect(locks!.n).toBe('0')
      }
    })

    it('A refuses afterwards: next_id(), next_ids(n), DEFAULT inserts (SF005); its sequence stops at L', async () => {
      for (const sql of [
        `SELECT shard_${shard}.next_id()`,
        `SELECT shard_${shard}.next_ids(3)`,
        `SELECT shard_${shard}.next_ids(5000)`,
        `SELECT shard_${shard}._reserve(10)`,
        `SELECT shard_${shard}._catch_up()`,
        `SELECT shard_${shard}._advance_to(0)`,
        `SELECT shard_${shard}._compose(1)`,
        `INSERT INTO ${table} (session) VALUES (1)`,
      ]) {
        const { code, message } = await failure(urlA, sql)
        expect(code).toBe('SF005')
        expect(message).toMatch(
          new RegExp(
            `logical shard ${shard} moved to another database \\(database sf_pg_move_b.*\\) on .*; update the shard map`,
          ),
        )
      }
      // Even nextval by hand ends at L: the sequence itself is fenced.
      const room = fence - (await seqState(urlA, shard)).last
      const { code } = await failure(
        urlA,
        `SELECT nextval('shard_${shard}.id_seq') FROM generate_series(1, ${room + 10n})`,
      )
      expect(code).toBe('2200H')
      expect(await seqState(urlA, shard)).toEqual({ last: fence, max: fence })
      const { code: setCode } = await failure(
        urlA,
        `SELECT setval('shard_${shard}.id_seq', ${fence + 1n})`,
      )
      expect(setCode).toBe('22003')
      expect(await readInstalledShards(poolA)).not.toContain(shard)
      expect(await readInstalledShards(poolA, { includeRetired: true })).toContain(shard)
    })

    it('re-installing the retired shard on A is refused (installer, raw script, even statement by statement)', async () => {
      const error = await installPostgres(poolA, { sharding, shards: [shard], cache }).catch(
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(ShardMovedError)
      expect((error as Error).message).toMatch(
        new RegExp(`shard\\(s\\) ${shard} moved from this database to another one`),
      )
      const ddl = postgresSql({ sharding, shards: [shard], cache })
      const { code } = await failure(urlA, ddl.script)
      expect(code).toBe('SF005')
      // Run the script the way psql without -1 and ON_ERROR_STOP does: each statement on its own,
      // errors ignored. The functions come back, the sequence's fence does not.
      const client = new pg.Client({ connectionString: urlA })
      await client.connect()
      const failed: string[] = []
      try {
        for (const statement of ddl.statements) {
          await client.query(statement).catch((e: { code: string }) => failed.push(e.code))
        }
      } finally {
        await client.end()
      }
      expect(failed).toContain('SF005')
      expect((await seqState(urlA, shard)).max).toBe(fence)
      const { code: revived } = await failure(
        urlA,
        `SELECT shard_${shard}.next_id() FROM generate_series(1, 3000)`,
      )
      expect(['2200H', '22003']).toContain(revived)
      expect(await seqState(urlA, shard)).toEqual({ last: fence, max: fence })
      expect((await shardRow(urlA, shard))!.retired).toBe(true)
    })

    it('running the move again is safe: the fence stays, B never moves back', async () => {
      const before = await seqState(urlB, shard)
      const again = await movePostgresShards({
        from: adminA,
        to: adminB,
        sharding,
        shards: [shard],
      })
      expect(again.shards[0]).toMatchObject({ shard, fencedAt: fence, resumed: true })
      expect((await seqState(urlA, shard)).max).toBe(fence)
      expect((await seqState(urlB, shard)).last >= before.last).toBe(true)
      const more = ids(await raw(urlB, `SELECT x::text AS id FROM shard_${shard}.next_ids(2000) x`))
      fromB.push(...more)
      const all = [...fromA, ...fromB]
      expect(new Set(all).size).toBe(all.length)
    })

    it('moving it back to A lifts A’s fence; A continues above B’s', async () => {
      const back = await movePostgresShards({ from: adminB, to: adminA, sharding, shards: [shard] })
      const fenceB = back.shards[0]!.fencedAt
      expect(fenceB > fence).toBe(true)
      for (const id of fromB) expect(sequenceValue(id) <= fenceB).toBe(true)
      expect((await shardRow(urlA, shard))!.retired).toBe(false)
      expect((await shardRow(urlB, shard))!.retired).toBe(true)
      const again = ids(
        await raw(urlA, `SELECT x::text AS id FROM shard_${shard}.next_ids(3000) x`),
      )
      for (const id of again) expect(sequenceValue(id) > fenceB).toBe(true)
      const [row] = await raw<{ id: string }>(urlA, `SELECT shard_${shard}.next_id()::text AS id`)
      const all = [...fromA, ...fromB, ...again, BigInt(row!.id)]
      expect(new Set(all).size).toBe(all.length)
      expect((await failure(urlB, `SELECT shard_${shard}.next_id()`)).code).toBe('SF005')
    })
  },
)

describe('movePostgresShards: crash half-way, locks, and refusals', () => {
  it('resumes after a crash between the fence and the arrival', async () => {
    // What a move that died after fencing shard 8 on A leaves behind.
    const client = new pg.Client({ connectionString: urlA })
    await client.connect()
    try {
      await client.query('SELECT x FROM shard_8.next_ids(300) x')
      await client.query(`BEGIN; ${fenceSql({ sharding }, 8).script} COMMIT;`)
    } finally {
      await client.end()
    }
    const half = await shardRow(urlA, 8)
    expect(half!.retired).toBe(true)
    expect((await failure(urlA, 'SELECT shard_8.next_id()')).code).toBe('SF005')
    const [absent] = await raw<{ present: boolean }>(
      urlB,
      `SELECT to_regnamespace('shard_8') IS NOT NULL AS present`,
    )
    expect(absent!.present).toBe(false)
    const result = await movePostgresShards({ from: adminA, to: adminB, sharding, shards: [8] })
    expect(result.shards[0]).toMatchObject({
      shard: 8,
      resumed: true,
      fencedAt: BigInt(half!.fence!),
    })
    const [first] = await raw<{ id: string }>(urlB, 'SELECT shard_8.next_id()::text AS id')
    expect(sequenceValue(BigInt(first!.id)) > BigInt(half!.fence!)).toBe(true)
  })

  it('waits for open transactions that drew from the shard, up to lockTimeoutMs, changing nothing', async () => {
    const holder = new pg.Client({ connectionString: urlA })
    await holder.connect()
    try {
      await holder.query('BEGIN')
      await holder.query('SELECT shard_9.next_id()')
      const error = await movePostgresShards({
        from: adminA,
        to: adminB,
        sharding,
        shards: [9],
        lockTimeoutMs: 300,
      }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockTimeoutError)
      expect((error as Error).message).toMatch(
        /shard 9: a lock on the old database was not granted within 300 ms.*Nothing of this shard was changed/,
      )
      // The open transaction goes on drawing; the shard is untouched.
      await holder.query('SELECT shard_9.next_id()')
      await holder.query('COMMIT')
    } finally {
      await holder.end()
    }
    expect((await shardRow(urlA, 9))!.retired).toBe(false)
    expect((await seqState(urlA, 9)).max).toBe(BigInt(instagram.timeLimit) * 1024n - 1n)
    const [gen] = await raw<{ g: string | null }>(
      urlA,
      `SELECT pg_sequence_last_value('shard_9.id_gen')::text AS g`,
    )
    expect(gen!.g).not.toBeNull()
    await raw(urlA, 'SELECT shard_9.next_ids(3)')
  })

  it('refuses a re-run towards another database, and a stale re-run once the new home moved the shard on', async () => {
    const urlD = await createDatabase('sf_pg_move_d')
    const adminC = pool(urlD, 2)
    try {
      await movePostgresShards({ from: adminA, to: adminB, sharding, shards: [3] })
      await movePostgresShards({ from: adminB, to: adminC, sharding, shards: [3] })
      const elsewhere = await movePostgresShards({
        from: adminA,
        to: adminC,
        sharding,
        shards: [3],
      })
        .then(() => undefined)
        .catch((e: unknown) => e)
      expect(elsewhere).toBeInstanceOf(ShardMovedError)
      expect((elsewhere as Error).message).toMatch(/already moved from the old database .* to /)
      // Re-running the old A -> B move would lift B's fence: the shard would live on B and C.
      const stale = await movePostgresShards({ from: adminA, to: adminB, sharding, shards: [3] })
        .then(() => undefined)
        .catch((e: unknown) => e)
      expect(stale).toBeInstanceOf(ShardMovedError)
      expect((stale as Error).message).toMatch(/stale re-run/)
      expect((await shardRow(urlB, 3))!.retired).toBe(true)
      expect((await failure(urlB, 'SELECT shard_3.next_id()')).code).toBe('SF005')
      const [fromC] = await raw<{ id: string }>(urlD, 'SELECT shard_3.next_id()::text AS id')
      expect(BigInt(fromC!.id) > 0n).toBe(true)
    } finally {
      await adminC.end()
      await dropDatabase('sf_pg_move_d')
    }
  })

  it('refuses the same database, shards not on from, other layouts and hostile names, changing nothing', async () => {
    const sameDb = pool(urlA, 1)
    try {
      const same = await movePostgresShards({ from: adminA, to: sameDb, sharding, shards: [1] })
        .then(() => undefined)
        .catch((e: unknown) => e)
      expect(same).toBeInstanceOf(ConfigurationError)
      expect((same as Error).message).toMatch(/same database/)
    } finally {
      await sameDb.end()
    }
    const identical = await movePostgresShards({ from: adminA, to: adminA, sharding, shards: [1] })
      .then(() => undefined)
      .catch((e: unknown) => e)
    expect(identical).toBeInstanceOf(ConfigurationError)
    const missing = await movePostgresShards({
      from: adminA,
      to: adminB,
      sharding,
      shards: '1-2,42',
    }).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(ConfigurationError)
    expect((missing as Error).message).toMatch(/shard\(s\) 42 not installed .* old database/)
    const other = defineLayout({
      name: 'other',
      epoch: '2024-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const wrongLayout = await movePostgresShards({
      from: adminA,
      to: adminB,
      sharding: defineSharding({ layout: other, logicalShards: 2000 }),
      shards: [1],
    }).catch((e: unknown) => e)
    expect(wrongLayout).toBeInstanceOf(ShardingMismatchError)
    const poolC = pool(urlC, 2)
    try {
      await installPostgres(poolC, {
        sharding: defineSharding({ layout: other, logicalShards: 2000 }),
        shards: [3],
      })
      const mismatch = await movePostgresShards({
        from: adminA,
        to: poolC,
        sharding,
        shards: [1],
      }).catch((e: unknown) => e)
      expect(mismatch).toBeInstanceOf(ShardingMismatchError)
      expect((mismatch as Error).message).toMatch(
        /new database "sf_pg_move_c_\w+" \(to\) uses layout "other"/,
      )
      const [c] = await raw<{ present: boolean }>(
        urlC,
        `SELECT to_regnamespace('shard_1') IS NOT NULL AS present`,
      )
      expect(c!.present).toBe(false)
    } finally {
      await poolC.end()
    }
    for (const bad of ['x"; DROP TABLE t; --', 'Shard', 'a b']) {
      await expect(
        movePostgresShards({ from: adminA, to: adminB, sharding, shards: [1], schemaPrefix: bad }),
      ).rejects.toBeInstanceOf(InvalidIdentifierError)
      await expect(
        movePostgresShards({ from: adminA, to: adminB, sharding, shards: [1], schema: bad }),
      ).rejects.toBeInstanceOf(InvalidIdentifierError)
    }
    // Shard 1 still lives on A, and only there.
    expect((await shardRow(urlA, 1))!.retired).toBe(false)
    await raw(urlA, 'SELECT shard_1.next_id()')
    const [b] = await raw<{ present: boolean }>(
      urlB,
      `SELECT to_regnamespace('shard_1') IS NOT NULL AS present`,
    )
    expect(b!.present).toBe(false)
  })
})

describe('_advance_to (a move of the sequence on the new home)', () => {
  it('draws running during repeated advances stay distinct, and a draw after an advance is above it', async () => {
    await installPostgres(poolB, { sharding, shards: [30] })
    let stop = false
    const drawers = Array.from({ length: 6 }, async (_, session) => {
      const client = await poolB.connect()
      const got: bigint[] = []
      try {
        while (!stop) {
          const sql =
            session % 2 === 0
              ? 'SELECT shard_30.next_id()::text AS id FROM generate_series(1, 100)'
              : 'SELECT x::text AS id FROM shard_30.next_ids(50) x'
          got.push(...ids((await client.query(sql)).rows))
        }
      } finally {
        client.release()
      }
      return got
    })
    const advances: bigint[] = []
    const after: bigint[] = []
    for (let i = 0; i < 40; i++) {
      const [state] = await raw<{ last: string }>(
        urlB,
        'SELECT last_value::text AS last FROM shard_30.id_seq',
      )
      // 1-10 ms of ID space ahead of where it is: a real move, every time.
      const target = BigInt(state!.last) + BigInt(1 + ((i * 7919) % 10)) * 1024n
      const [moved] = await raw<{ v: string }>(
        urlB,
        `SELECT shard_30._advance_to(${target})::text AS v`,
      )
      expect(BigInt(moved!.v) >= target).toBe(true)
      advances.push(target)
      const [next] = await raw<{ id: string }>(urlB, 'SELECT shard_30.next_id()::text AS id')
      expect(sequenceValue(BigInt(next!.id)) > target).toBe(true)
      after.push(BigInt(next!.id))
      await sleep(5)
    }
    // Never backwards: an advance to below the sequence leaves it where it is.
    const [now] = await raw<{ last: string }>(
      urlB,
      'SELECT last_value::text AS last FROM shard_30.id_seq',
    )
    const [kept] = await raw<{ v: string }>(urlB, 'SELECT shard_30._advance_to(5)::text AS v')
    expect(BigInt(kept!.v) >= BigInt(now!.last)).toBe(true)
    stop = true
    const all = [...(await Promise.all(drawers)).flat(), ...after]
    expect(all.length).toBeGreaterThan(1000)
    expect(new Set(all).size).toBe(all.length)
  })
})
