import { watchSockets } from '@shardflake/conformance'
import { CancelledError, ConfigurationError, PrefetchSource } from '@shardflake/core'
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { sharding, testFixture } from './helpers'
import { runTag, type ThrowawayServer } from './redis-servers'

/**
 * `close()` while the server is silent (SIGSTOP: the connection stays open, nothing answers) and
 * calls are in flight, as in a rolling deploy's SIGTERM handler: the calls end at once with
 * `CancelledError`, `close()` resolves although the server never answers its QUIT (within the
 * source's `timeoutMs`), and the socket it opened is closed, not left half-closed. The server stays
 * stopped until the test has seen all of that.
 */
const prefix = `sf:redis:close:${runTag}:`
let server: ThrowawayServer
const fixture = testFixture(() => ({ sharding, servers: server.url, keyPrefix: prefix }))

beforeAll(async () => {
  server = await fixture.server()
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

describe('close() with the server stopped and calls in flight', () => {
  it('RedisSource from a URL: calls end CANCELLED, close() resolves, no socket is left', async () => {
    const watched = sockets()
    const source = fixture.source({ timeoutMs: 1000 })
    await source.nextIds(1, 10)
    await whileStopped(async () => {
      const calls = [1, 2, 3].map((shard) => settle(source.nextIds(shard, 5)))
      await new Promise((resolve) => setTimeout(resolve, 50))
      await source.close()
      for (const error of await Promise.all(calls)) expect(error).toBeInstanceOf(CancelledError)
      expect(watched.open()).toEqual([])
      await expect(source.nextIds(1, 1)).rejects.toBeInstanceOf(ConfigurationError)
    })
  })

  it('PrefetchSource over a RedisSource: waiting callers end CANCELLED, close() resolves', async () => {
    const watched = sockets()
    const source = new PrefetchSource(fixture.source({ timeoutMs: 1000 }), { size: 50 })
    await source.nextId(1)
    await whileStopped(async () => {
      const calls = [2, 2, 3].map((shard) => settle(source.nextId(shard)))
      await new Promise((resolve) => setTimeout(resolve, 50))
      await source.close()
      for (const error of await Promise.all(calls)) expect(error).toBeInstanceOf(CancelledError)
      expect(watched.open()).toEqual([])
    })
  })
})
