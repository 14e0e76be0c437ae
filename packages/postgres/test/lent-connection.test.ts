import { createServer, type Server, Socket } from 'node:net'
import { ConnectionLostError } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { installPostgres, PostgresSource } from '../src/index'
import { createDatabase, dropDatabase, raw, sharding } from './helpers'

/**
 * A server that ends a session in the same read as the one that completes its startup (a backend
 * terminated at once, a shutdown): pg-pool lends the new connection from inside that read, after
 * removing its own 'error' listener, so the error is emitted before the borrower can listen. The
 * source must report a lost connection, and the process must not die of an unhandled 'error'.
 */
const DB = 'sf_pg_lent_connection'
const SHARD = 2
let url: string

beforeAll(async () => {
  url = await createDatabase(DB)
  const admin = new pg.Pool({ connectionString: url, max: 1 })
  await installPostgres(admin, { sharding, shards: [SHARD] })
  await admin.end()
})
afterAll(async () => {
  await dropDatabase(DB)
})

/**
 * A TCP relay to the server. On the first connection it holds the server's messages once the
 * startup is complete (ReadyForQuery), terminates that backend, and passes everything on with the
 * server's FATAL error in one write; later connections are relayed as they are.
 */
async function startRelay(): Promise<{
  url: string
  trapped: () => boolean
  close(): Promise<void>
}> {
  const server = new URL(url)
  const sockets: Socket[] = []
  let trapped = false
  const relay: Server = createServer((client) => {
    const upstream = new Socket()
    upstream.connect(Number(server.port || 5432), server.hostname)
    client.on('error', () => undefined)
    upstream.on('error', () => undefined)
    sockets.push(client, upstream)
    client.pipe(upstream)
    if (trapped) {
      upstream.pipe(client)
      return
    }
    trapped = true
    let held = Buffer.alloc(0)
    let pid = 0
    let holding = false
    upstream.on('data', (chunk: Buffer) => {
      held = Buffer.concat([held, chunk])
      for (let at = 0; held.length - at >= 5; ) {
        const type = String.fromCharCode(held[at]!)
        const length = held.readInt32BE(at + 1)
        if (held.length - at < 1 + length) break
        if (type === 'K') pid = held.readInt32BE(at + 5)
        if (type === 'Z' && !holding) {
          holding = true
          void raw(url, 'SELECT pg_terminate_backend($1)', [pid])
        }
        if (type === 'E' && holding) {
          client.write(held)
          return
        }
        at += 1 + length
      }
    })
  })
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve))
  const address = relay.address()
  const relayed = new URL(url)
  relayed.hostname = '127.0.0.1'
  relayed.port = String(typeof address === 'object' && address ? address.port : 0)
  return {
    url: relayed.toString(),
    trapped: () => trapped,
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => relay.close(resolve))
    },
  }
}

it('a new connection ended by the server as the pool lends it: ConnectionLostError, and the process lives', async () => {
  const relay = await startRelay()
  const pool = new pg.Pool({ connectionString: relay.url, max: 1 })
  pool.on('error', () => undefined)
  try {
    const source = new PostgresSource({ sharding, databases: pool, timeoutMs: 20_000 })
    const error = await source.nextIds(SHARD, 3).catch((failure: unknown) => failure)
    expect(relay.trapped()).toBe(true)
    expect(error).toBeInstanceOf(ConnectionLostError)
    expect((error as ConnectionLostError).retryable).toBe(true)
    // The broken connection was not kept: the next call gets a new one and its IDs.
    expect(await source.nextIds(SHARD, 3)).toHaveLength(3)
    await source.close()
  } finally {
    await pool.end()
    await relay.close()
  }
})
