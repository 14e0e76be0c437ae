import {
  ConfigurationError,
  ConnectionLostError,
  ConnectionRefusedError,
  SourceUnavailableError,
  TimedOutError,
} from '@shardflake/core'
import { beforeAll, describe, expect, it } from 'vitest'
import { translateRedisError } from '../src/errors'
import { failure, sharding, testFixture } from './helpers'
import { runTag, type ThrowawayServer } from './redis-servers'

// How each kind of failure a server gives reaches the caller: read from the failure's structure
// (socket state, the reply's error code), with the driver's error as cause.
const prefix = `sf:redis:connections:${runTag}:`
let healthy: ThrowawayServer
const fixture = testFixture(() => ({ sharding, servers: healthy.url, keyPrefix: prefix }))
const open = fixture.source
const client = fixture.client
const start = fixture.server

beforeAll(async () => {
  healthy = await start()
})

describe('RedisSource failures, translated on structure', () => {
  it('reports a connection that breaks while the call is under way as ConnectionLostError', async () => {
    const server = await start()
    const source = open({ servers: server.url, timeoutMs: 30_000 })
    await source.nextId(1)
    await server.kill('SIGSTOP') // the call is written to the socket, nobody reads it
    const pending = failure(source.nextId(1))
    await new Promise((resolve) => setImmediate(resolve))
    await server.kill('SIGKILL')
    const error = await pending
    expect(error).toBeInstanceOf(SourceUnavailableError)
    expect(error.cause).toBeInstanceOf(ConnectionLostError)
    expect((error.cause as ConnectionLostError).cause).toBeInstanceOf(Error)
  })

  it("tells ioredis' own command timeout from a broken connection by the time the command took", () => {
    // ioredis rejects both with a plain Error; its timer counts whole milliseconds from a start
    // rounded down, so it can fire a fraction of a millisecond before commandTimeout has passed.
    const plain = new Error('from the driver')
    const ready = { server: 'r:1', statusAtSend: 'ready', status: 'ready', socketError: undefined }
    const after = (elapsedMs: number) =>
      translateRedisError(plain, { ...ready, elapsedMs, commandTimeoutMs: 200 })
    expect(after(199.2)).toBeInstanceOf(TimedOutError)
    expect(after(260)).toBeInstanceOf(TimedOutError)
    expect(after(150)).toBeInstanceOf(ConnectionLostError)
    expect(after(199.2).cause).toBe(plain)
  })

  it('fails over from a server busy in a long script (BUSY reply) and reports it refused', async () => {
    const server = await start()
    const admin = client(server.url)
    await admin.config('SET', 'busy-reply-threshold', '50')
    const source = open({ servers: [server.url, healthy.url], timeoutMs: 10_000 })
    const single = open({ servers: server.url, timeoutMs: 10_000, keyPrefix: `${prefix}busy:` })
    const [busyName, healthyName] = source.serverNames as [string, string]
    expect((await source.nextIdWithServer(2)).server).toBe(busyName)
    await single.nextId(2)
    // A script that runs for 1.5 s, from another connection.
    const spin = `local t = redis.call('TIME') local start = t[1] * 1000000 + t[2]
      repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start > 1500000 return 1`
    const spinning = client(server.url).eval(spin, 0)
    const probe = client(server.url)
    while (
      await probe.ping().then(
        () => true,
        () => false,
      )
    ) {} // until it answers BUSY
    const served = await source.nextIdWithServer(2)
    expect(served.server).toBe(healthyName)
    const error = await failure(single.nextId(2))
    expect(error.cause).toBeInstanceOf(ConnectionRefusedError)
    expect(((error.cause as ConnectionRefusedError).cause as Error).name).toBe('ReplyError')
    await spinning
  })

  it('refuses a read-only replica with ConfigurationError, naming what to check', async () => {
    const primary = await start()
    const replica = await start()
    await client(replica.url).replicaof('127.0.0.1', String(primary.port))
    const error = await failure(open({ servers: replica.url }).nextId(3))
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(error.message).toMatch(/replica/)
    expect((error.cause as Error).name).toBe('ReplyError')
  })
})
