import { startPostgres, type ThrowawayServer, watchSockets } from '@shardflake/conformance'
import { CancelledError, ConfigurationError, PrefetchSource } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { installPostgres, PostgresSource } from '../src/index'
import { sharding } from './helpers'

/**
 * `close()` while the server is silent (SIGSTOP: connections stay open, nothing answers) and calls
 * are in flight, as in a rolling deploy's SIGTERM handler: the calls end at once with
 * `CancelledError`, `close()` resolves within the source's `timeoutMs` although the server never
 * answers, and it leaves no socket open behind it. The server stays stopped until the test has
 * seen all of that, so nothing here can wait for it.
 */
let server: ThrowawayServer

beforeAll(async () => {
  server = await startPostgres({ name: 'close-pg' })
  const pool = new pg.Pool({ connectionString: server.url, max: 1 })
  await installPostgres(pool, { sharding, shards: '0-7' })
  await pool.end()
})
afterAll(async () => {
  await server?.stop()
})

/** The sockets a test's source connects; `open()` lists those still open. */
function sockets() {
  const watched = watchSockets()
  onTestFinished(() => watched.stop())
  return watched
}

async function whileStopped(run: () => Promise<void>): Promise<void> {
  await server.kill('SIGSTOP')
  try {
    await run()
  } finally {
    await server.kill('SIGCONT')
  }
}

describe('close() with the server stopped and calls in flight', () => {
  it('PostgresSource from a URL: calls end CANCELLED, close() resolves, no socket is left', async () => {
    const watched = sockets()
    const source = new PostgresSource({ sharding, databases: server.url, timeoutMs: 1000 })
    // Connected and verified, with more connections than the calls below take: idle ones stay.
    await Promise.all([1, 2, 3, 4, 5, 6, 7].map((shard) => source.nextIds(shard, 10)))
    await whileStopped(async () => {
      const calls = [1, 2, 3, 4].map((shard) =>
        source.nextIds(shard, 5).catch((error: unknown) => error),
      )
      await new Promise((resolve) => setTimeout(resolve, 50)) // the calls wait on the server
      await source.close()
      for (const error of await Promise.all(calls)) expect(error).toBeInstanceOf(CancelledError)
      expect(watched.open()).toEqual([])
      await expect(source.nextIds(1, 1)).rejects.toBeInstanceOf(ConfigurationError)
    })
  })

  it('PostgresSource from a URL, its first connection still opening: close() resolves', async () => {
    const watched = sockets()
    const source = new PostgresSource({ sharding, databases: server.url, timeoutMs: 1000 })
    await whileStopped(async () => {
      const call = source.nextIds(1, 5).catch((error: unknown) => error)
      await new Promise((resolve) => setTimeout(resolve, 50))
      await source.close()
      expect(await call).toBeInstanceOf(CancelledError)
      expect(watched.open()).toEqual([])
    })
  })

  it('a pool you pass in: calls end CANCELLED, close() resolves, your pool can still be ended', async () => {
    const pool = new pg.Pool({ connectionString: server.url, max: 4 })
    pool.on('error', () => undefined)
    const source = new PostgresSource({ sharding, databases: pool, timeoutMs: 1000 })
    await source.nextIds(1, 10)
    await whileStopped(async () => {
      const calls = [1, 2].map((shard) => source.nextIds(shard, 5).catch((error: unknown) => error))
      await new Promise((resolve) => setTimeout(resolve, 50))
      await source.close()
      for (const error of await Promise.all(calls)) expect(error).toBeInstanceOf(CancelledError)
    })
    // The connections the calls held were given back (broken): the pool ends.
    await pool.end()
  })

  it('PrefetchSource over a PostgresSource: waiting callers end CANCELLED, close() resolves', async () => {
    const watched = sockets()
    const inner = new PostgresSource({ sharding, databases: server.url, timeoutMs: 1000 })
    const source = new PrefetchSource(inner, { size: 100 })
    await source.nextId(1)
    await whileStopped(async () => {
      const calls = [2, 2, 3].map((shard) => source.nextId(shard).catch((error: unknown) => error))
      await new Promise((resolve) => setTimeout(resolve, 50))
      await source.close()
      for (const error of await Promise.all(calls)) expect(error).toBeInstanceOf(CancelledError)
      expect(watched.open()).toEqual([])
    })
  })
})
