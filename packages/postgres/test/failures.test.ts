import { createServer, type Server, Socket } from 'node:net'
import {
  CancelledError,
  ConfigurationError,
  ConnectionLostError,
  ConnectionRefusedError,
  defineLayout,
  defineSharding,
  InvalidArgumentError,
  type ShardflakeError,
  ShardOutOfRangeError,
  ShardOverloadedError,
  TimedOutError,
  TimeExhaustedError,
} from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type InstallPostgresOptions,
  installPostgres,
  PostgresSource,
  type PostgresSourceOptions,
  type SqlClient,
} from '../src/index'
import { createDatabase, dropDatabase, holdMoveLock, RUN, raw, sharding } from './helpers'

/**
 * Every failure of a call reaches the caller as a typed error, on a real server: sessions
 * terminated and cancelled mid-call, statement timeouts, the source's own deadline and the
 * caller's signal (both cancel the statement on the server), a connection cut under a query,
 * refused connections, counts and shard lists out of bounds, an exhausted layout, overload.
 */
const DB = 'sf_pg_failures'
const SHARD = 3
let url: string
let pool: pg.Pool

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 6 })
  pool.on('error', () => undefined)
  await installPostgres(pool, { sharding, shards: [SHARD, 4] })
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

/**
 * Holds the move lock of the shard's current generation on a session of its own: a reservation
 * (`next_ids(n)` for n >= 128) of the shard then waits for it inside the server, as long as we like.
 */
async function holdShardLock(shard: number): Promise<() => Promise<void>> {
  const holder = new pg.Client({ connectionString: url })
  await holder.connect()
  const unlock = await holdMoveLock(holder, shard)
  return async () => {
    await unlock()
    await holder.end()
  }
}

/** Backends of this database waiting for a move lock inside next_ids (polling it). */
async function waiting(): Promise<number[]> {
  const rows = await raw<{ pid: number }>(
    url,
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'
       AND query LIKE '%next_ids%' AND pid <> pg_backend_pid()`,
  )
  return rows.map((row) => row.pid)
}

/** Polls until `check` holds (at most 10 s): the server's state, not a timing assertion. */
async function until<T>(read: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await read()
    if (check(value)) return value
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error('the server never reached the expected state')
}

/** Starts a blocked reservation, runs `act` once it waits in the server, and returns its error. */
async function failDuring(
  source: PostgresSource,
  act: (pid: number) => Promise<unknown>,
  options: { signal?: AbortSignal } = {},
): Promise<unknown> {
  const release = await holdShardLock(SHARD)
  try {
    const call = source.nextIds(SHARD, 500, options).catch((error: unknown) => error)
    const [pid] = await until(waiting, (pids) => pids.length === 1)
    await act(pid!)
    return await call
  } finally {
    await release()
  }
}

describe('failures of a call are typed errors with the driver error as cause', () => {
  it('a session terminated mid-call (pg_terminate_backend): ConnectionLostError', async () => {
    const source = new PostgresSource({ sharding, databases: pool, timeoutMs: 20_000 })
    const error = await failDuring(source, (pid) =>
      raw(url, 'SELECT pg_terminate_backend($1)', [pid]),
    )
    expect(error).toBeInstanceOf(ConnectionLostError)
    expect((error as ShardflakeError).retryable).toBe(true)
    expect((error as { cause?: { code?: string } }).cause?.code).toBe('57P01')
    // The pool gave up the broken connection; the next call works.
    expect(await source.nextIds(SHARD, 500)).toHaveLength(500)
  })

  it('a connection cut under a query (no SQLSTATE, "terminated unexpectedly"): ConnectionLostError', async () => {
    // A TCP relay to the server that we cut: the driver sees the socket end, with no error
    // message from the server, and rejects with a plain Error.
    const sockets: Socket[] = []
    const relay: Server = createServer((client) => {
      const server = new URL(url)
      const upstream = new Socket()
      upstream.connect(Number(server.port || 5432), server.hostname)
      client.pipe(upstream).pipe(client)
      client.on('error', () => undefined)
      upstream.on('error', () => undefined)
      sockets.push(client, upstream)
    })
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve))
    const address = relay.address()
    const port = typeof address === 'object' && address ? address.port : 0
    const relayed = new URL(url)
    relayed.hostname = '127.0.0.1'
    relayed.port = String(port)
    const relayPool = new pg.Pool({ connectionString: relayed.toString(), max: 2 })
    relayPool.on('error', () => undefined)
    try {
      const source = new PostgresSource({ sharding, databases: relayPool, timeoutMs: 20_000 })
      expect(await source.nextIds(4, 3)).toHaveLength(3)
      const error = await failDuring(source, async () => {
        for (const socket of sockets) socket.destroy()
      })
      expect(error).toBeInstanceOf(ConnectionLostError)
      const cause = (error as { cause?: { code?: unknown } }).cause
      expect(cause).toBeInstanceOf(Error)
      expect(cause?.code).toBeUndefined()
    } finally {
      await relayPool.end()
      await new Promise((resolve) => relay.close(resolve))
    }
  })

  it('a statement cancelled (pg_cancel_backend) or timed out by the server: CancelledError', async () => {
    const source = new PostgresSource({ sharding, databases: pool, timeoutMs: 20_000 })
    const cancelled = await failDuring(source, (pid) =>
      raw(url, 'SELECT pg_cancel_backend($1)', [pid]),
    )
    expect(cancelled).toBeInstanceOf(CancelledError)
    expect((cancelled as { cause?: { code?: string } }).cause?.code).toBe('57014')

    const limited = new pg.Pool({ connectionString: url, max: 2, statement_timeout: 200 })
    limited.on('error', () => undefined)
    try {
      const bounded = new PostgresSource({ sharding, databases: limited, timeoutMs: 20_000 })
      await bounded.nextIds(SHARD, 1) // the sharding check, before the lock is taken
      const error = await failDuring(bounded, async () => undefined)
      expect(error).toBeInstanceOf(CancelledError)
      expect((error as { cause?: { code?: string } }).cause?.code).toBe('57014')
    } finally {
      await limited.end()
    }
    // The shard's lock was let go on the cancel: reservations work.
    expect(await source.nextIds(SHARD, 500)).toHaveLength(500)
  })

  it("the source's timeoutMs and the caller's signal give up and cancel the statement on the server", async () => {
    const source = new PostgresSource({ sharding, databases: pool, timeoutMs: 300 })
    await source.nextIds(SHARD, 1)
    const release = await holdShardLock(SHARD)
    try {
      const timedOut = await source.nextIds(SHARD, 500).catch((e: unknown) => e)
      expect(timedOut).toBeInstanceOf(TimedOutError)
      // pg_cancel_backend reached the waiting statement: nothing waits in the server any more.
      await until(waiting, (pids) => pids.length === 0)
    } finally {
      await release()
    }
    const patient = new PostgresSource({ sharding, databases: pool, timeoutMs: 20_000 })
    const controller = new AbortController()
    const error = await failDuring(
      patient,
      async () => {
        controller.abort()
        await until(waiting, (pids) => pids.length === 0)
      },
      { signal: controller.signal },
    )
    expect(error).toBeInstanceOf(CancelledError)
    await expect(patient.nextId(SHARD, { signal: controller.signal })).rejects.toBeInstanceOf(
      CancelledError,
    )
  })

  it('a caller giving up during the first call (the shared sharding check) fails alone', async () => {
    for (let round = 0; round < 5; round++) {
      const fresh = new pg.Pool({ connectionString: url, max: 4 })
      fresh.on('error', () => undefined)
      try {
        const source = new PostgresSource({ sharding, databases: fresh })
        const [given, kept] = await Promise.allSettled([
          source.nextIds(SHARD, 1, { signal: AbortSignal.timeout(2) }),
          source.nextIds(SHARD, 20),
        ])
        if (given.status === 'rejected') expect(given.reason).toBeInstanceOf(CancelledError)
        expect(kept.status).toBe('fulfilled')
      } finally {
        await fresh.end()
      }
    }
  })

  it('a server that refuses connections: ConnectionRefusedError; close() ends the pools it opened', async () => {
    const nowhere = new PostgresSource({
      sharding,
      databases: 'postgres://postgres@127.0.0.1:1/none',
    })
    const error = await nowhere.nextId(SHARD).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConnectionRefusedError)
    expect((error as { cause?: { code?: string } }).cause?.code).toBe('ECONNREFUSED')
    await nowhere.close()
    const refusing = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/none' })
    try {
      await expect(installPostgres(refusing, { sharding, shards: [1] })).rejects.toBeInstanceOf(
        ConnectionRefusedError,
      )
    } finally {
      await refusing.end()
    }

    const app = `sf_close_${RUN}`
    const withUrl = new URL(url)
    withUrl.searchParams.set('application_name', app)
    const opened = new PostgresSource({ sharding, databases: withUrl.toString() })
    expect(await opened.nextIds(SHARD, 5)).toHaveLength(5)
    expect(await opened.poolFor(SHARD).query('SELECT 1 AS one')).toMatchObject({
      rows: [{ one: 1 }],
    })
    const sessions = () =>
      raw<{ n: number }>(
        url,
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
        [app],
      ).then(([row]) => row!.n)
    expect(await sessions()).toBeGreaterThan(0)
    await opened.close()
    await until(sessions, (n) => n === 0)
    await expect(opened.nextId(SHARD)).rejects.toBeInstanceOf(ConfigurationError)

    // A pool passed in stays open.
    const passed = new PostgresSource({ sharding, databases: pool })
    await passed.nextId(SHARD)
    await passed.close()
    expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }])
  })
})

describe('bad input is refused before anything happens', () => {
  /** A client that counts every statement it is sent. */
  function counting(): SqlClient & { sent: number } {
    const client = {
      sent: 0,
      query(text: string, params?: unknown[]) {
        client.sent++
        return pool.query(text, params)
      },
    }
    return client
  }

  it('counts beyond 1,000,000 per call: InvalidArgumentError, no query sent', async () => {
    const client = counting()
    const source = new PostgresSource({ sharding, databases: client })
    for (const count of [2 ** 31, 1e9, 1_000_001, 0, 1.5, Number.NaN]) {
      await expect(source.nextIds(SHARD, count)).rejects.toBeInstanceOf(InvalidArgumentError)
    }
    expect(client.sent).toBe(0)
  })

  it('a shard list beyond the logical shards: ShardOutOfRangeError before expanding it, nothing created', async () => {
    const error = await installPostgres(pool, {
      sharding,
      schema: 'sf_far',
      shards: '0-4000000000',
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ShardOutOfRangeError)
    const [row] = await raw<{ present: boolean }>(
      url,
      `SELECT to_regnamespace('sf_far') IS NOT NULL AS present`,
    )
    expect(row!.present).toBe(false)
  })

  it('a layout whose time ran out (epoch 1970, 41 bits without the sign bit: ended 2004): TimeExhaustedError, nothing created', async () => {
    const spent = defineLayout({
      name: 'spent',
      epoch: 0,
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const spentSharding = defineSharding({ layout: spent, logicalShards: 16 })
    const error = await installPostgres(pool, {
      sharding: spentSharding,
      schema: 'sf_spent',
      schemaPrefix: 'spent_',
      shards: [1],
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TimeExhaustedError)
    const [row] = await raw<{ common: boolean; shard: boolean }>(
      url,
      `SELECT to_regnamespace('sf_spent') IS NOT NULL AS common, to_regnamespace('spent_1') IS NOT NULL AS shard`,
    )
    expect(row).toEqual({ common: false, shard: false })
    expect(() => new PostgresSource({ sharding: spentSharding, databases: pool })).toThrow(
      TimeExhaustedError,
    )
  })

  it('without a sharding: ConfigurationError naming logicalShards', async () => {
    // What a JavaScript caller (no type checker) can pass: the required sharding left out.
    const options: Partial<PostgresSourceOptions> = { databases: pool }
    expect(() => new PostgresSource(options as PostgresSourceOptions)).toThrow(/logicalShards/)
    const install: Partial<InstallPostgresOptions> = { shards: [1] }
    await expect(installPostgres(pool, install as InstallPostgresOptions)).rejects.toThrow(
      ConfigurationError,
    )
  })
})

describe('what the SQL refuses is typed by its own SQLSTATE', () => {
  it('a clock past the end of the layout: TimeExhaustedError (SF007), not a moved shard', async () => {
    await installPostgres(pool, { sharding, schema: 'sf_end', schemaPrefix: 'end_', shards: [2] })
    const source = new PostgresSource({
      sharding,
      databases: pool,
      schema: 'sf_end',
      schemaPrefix: 'end_',
    })
    await source.nextIds(2, 3)
    const { layout } = sharding
    const end = layout.epoch + layout.timeLimit * layout.timeUnitMs
    await raw(
      url,
      `CREATE OR REPLACE FUNCTION sf_end.now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS $$ SELECT ${end + 1000}::bigint $$`,
    )
    for (const count of [1, 500]) {
      const error = await source.nextIds(2, count).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(TimeExhaustedError)
      expect((error as { cause?: { code?: string } }).cause?.code).toBe('SF007')
    }
  })

  it('a batch beyond what the shard makes within its drift: ShardOverloadedError, not a clock fault', async () => {
    await installPostgres(pool, {
      sharding,
      schema: 'sf_over',
      schemaPrefix: 'over_',
      shards: [1],
      maxDriftMs: 100,
      maxWaitMs: 100,
    })
    const source = new PostgresSource({
      sharding,
      databases: pool,
      schema: 'sf_over',
      schemaPrefix: 'over_',
    })
    // 1024 IDs per ms for 100 ms of drift and 100 ms of wait: at most 204,800 in one call.
    const error = await source.nextIds(1, 500_000).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ShardOverloadedError)
    expect((error as Error).message).not.toMatch(/fix the clock/i)
    expect((error as Error).message).toMatch(/at most 204800 IDs in one call/)
    expect((error as { cause?: { code?: string } }).cause?.code).toBe('SF006')
    expect(await source.nextIds(1, 200_000)).toHaveLength(200_000)
  })
})
