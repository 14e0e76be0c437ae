import { watchSockets } from '@shardflake/conformance'
import {
  CancelledError,
  ConfigurationError,
  defineSharding,
  instagram,
  PrefetchSource,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { installMysql, installTicketServers, MysqlSource, TicketServerSource } from '../src'
import { createPool, startMariadb, type ThrowawayServer } from './helpers'

/**
 * `close()` while the server is silent (SIGSTOP: connections stay open, nothing answers) and calls
 * are in flight, as in a rolling deploy's SIGTERM handler: the calls end at once with
 * `CancelledError`, `close()` resolves although the server never answers (within the source's
 * `timeoutMs`), and it leaves none of the sockets it opened open, not even half-closed. The server
 * stays stopped until the test has seen all of that, so nothing here can wait for it.
 */
const sharding = defineSharding({ layout: instagram, logicalShards: 16 })
let server: ThrowawayServer
let admin: Pool

beforeAll(async () => {
  server = await startMariadb({ name: 'close-mariadb' })
  admin = createPool(server.url, { connectionLimit: 2 })
  await installMysql(admin, { sharding, shards: '0-7' })
  await installTicketServers({ servers: [admin], sequence: 'closing' })
})
afterAll(async () => {
  await admin?.end()
  await server?.stop()
})

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

const settle = (promise: Promise<unknown>) => promise.catch((error: unknown) => error)
const pause = () => new Promise((resolve) => setTimeout(resolve, 50))

describe('close() with the server stopped and calls in flight', () => {
  it('MysqlSource from a URL: calls end CANCELLED, close() resolves, no socket is left', async () => {
    const watched = sockets()
    const source = new MysqlSource({ sharding, databases: server.url, timeoutMs: 1000 })
    // Connected and checked, with more connections than the calls below take: idle ones stay.
    await Promise.all([0, 1, 2, 3, 4, 5].map((shard) => source.nextIds(shard, 10)))
    await whileStopped(async () => {
      const calls = [0, 1, 2].map((shard) => settle(source.nextIds(shard, 5)))
      await pause()
      await source.close()
      for (const error of await Promise.all(calls)) expect(error).toBeInstanceOf(CancelledError)
      expect(watched.open()).toEqual([])
      await expect(source.nextIds(0, 1)).rejects.toBeInstanceOf(ConfigurationError)
    })
  })

  it('MysqlSource from a URL, its first connection still opening: close() resolves', async () => {
    const watched = sockets()
    const source = new MysqlSource({ sharding, databases: server.url, timeoutMs: 1000 })
    await whileStopped(async () => {
      const call = settle(source.nextIds(1, 5))
      await pause()
      await source.close()
      expect(await call).toBeInstanceOf(CancelledError)
      expect(watched.open()).toEqual([])
    })
  })

  it('MysqlSource with prefetch on a pool you pass in: calls end CANCELLED, their connections are closed', async () => {
    const watched = sockets()
    const pool = createPool(server.url, { connectionLimit: 2 })
    const source = new MysqlSource({
      sharding,
      databases: pool,
      timeoutMs: 1000,
      prefetch: { size: 10 },
    })
    await Promise.all([source.nextId(1), source.nextId(2)]) // two connections, both idle
    await whileStopped(async () => {
      const calls = [3, 3, 4].map((shard) => settle(source.nextId(shard)))
      await pause()
      await source.close()
      for (const error of await Promise.all(calls)) expect(error).toBeInstanceOf(CancelledError)
      // The two the fetches held are closed, not left half-open towards the stopped server.
      expect(watched.open()).toEqual([])
    })
    // Your pool is yours: it still works, and ends.
    expect(await pool.query('SELECT 1 AS one')).toBeDefined()
    await pool.end()
  })

  it('PrefetchSource over a MysqlSource: waiting callers end CANCELLED, close() resolves', async () => {
    const watched = sockets()
    const inner = new MysqlSource({ sharding, databases: server.url, timeoutMs: 1000 })
    const source = new PrefetchSource(inner, { size: 100 })
    await source.nextId(0)
    await whileStopped(async () => {
      const calls = [1, 1, 2].map((shard) => settle(source.nextId(shard)))
      await pause()
      await source.close()
      for (const error of await Promise.all(calls)) expect(error).toBeInstanceOf(CancelledError)
      expect(watched.open()).toEqual([])
    })
  })

  it('TicketServerSource: calls end CANCELLED, close() returns, the connections they held are closed', async () => {
    const watched = sockets()
    const pool = createPool(server.url, { connectionLimit: 2 })
    const source = new TicketServerSource({ servers: [pool], sequence: 'closing', timeoutMs: 1000 })
    await Promise.all([source.nextId(0), source.nextId(0)]) // two connections, both idle
    await whileStopped(async () => {
      const calls = [0, 0].map(() => settle(source.nextIds(0, 3)))
      await pause()
      source.close()
      for (const error of await Promise.all(calls)) expect(error).toBeInstanceOf(CancelledError)
      await expect(source.nextId(0)).rejects.toBeInstanceOf(ConfigurationError)
      expect(watched.open()).toEqual([])
    })
    await pool.end()
  })
})
