import {
  CancelledError,
  ClockMovedBackwardsError,
  ConfigurationError,
  ConnectionLostError,
  ConnectionRefusedError,
  defineLayout,
  defineSharding,
  InvalidArgumentError,
  instagram,
  ShardingMismatchError,
  ShardOverloadedError,
  SourceUnavailableError,
  TimedOutError,
  TimeExhaustedError,
} from '@shardflake/core'
import { beforeAll, describe, expect, it } from 'vitest'
import { RedisSource, type RedisSourceOptions } from '../src'
import { failure, fakeClock, sharding, testFixture } from './helpers'
import { runTag, type ThrowawayServer } from './redis-servers'

const prefix = `sf:redis:faults:${runTag}:`
let a: ThrowawayServer
let b: ThrowawayServer
const fixture = testFixture(() => ({ sharding, servers: [a.url, b.url], keyPrefix: prefix }))
const open = fixture.source
const admin = fixture.client

beforeAll(async () => {
  ;[a, b] = await Promise.all([fixture.server(), fixture.server()])
})

describe('RedisSource refuses bad input before anything happens', () => {
  it('needs a sharding, and names logicalShards', () => {
    // What a JavaScript caller (no type checker) can pass: the required sharding left out.
    const given: Partial<RedisSourceOptions> = { servers: 'redis://127.0.0.1:1' }
    const options = given as RedisSourceOptions
    expect(() => new RedisSource(options)).toThrow(ConfigurationError)
    expect(() => new RedisSource(options)).toThrow(/logicalShards/)
  })

  it('refuses a server string that is not a Redis URL, and misspelled options naming the closest', () => {
    // As a JavaScript caller may write them.
    const construct = (options: unknown) => Reflect.construct(RedisSource, [options])
    expect(() => construct({ sharding, servers: 'not a url' })).toThrow(InvalidArgumentError)
    expect(() => construct({ sharding, servers: [a.url, 'not a url'] })).toThrow(
      'servers[1] is not a Redis URL: "not a url".',
    )
    expect(() => construct({ sharding, servers: [null] })).toThrow(ConfigurationError)
    expect(() => construct({ sharding, servers: a.url, timeoutMS: 5 })).toThrow(
      'RedisSource options has no option "timeoutMS". Did you mean "timeoutMs"?',
    )
    expect(() => construct({ sharding, servers: a.url, maxDriftMS: 5 })).toThrow(
      'Did you mean "maxDriftMs"?',
    )
    expect(() => construct({ sharding, servers: a.url, floorOf: 5 })).toThrow(InvalidArgumentError)
  })

  it('bounds every duration option', () => {
    for (const bad of [
      { maxDriftMs: 1e14 },
      { maxWaitMs: -1 },
      { timeoutMs: 0 },
      { retryAfterMs: 1.5 },
    ]) {
      expect(() => new RedisSource({ sharding, servers: a.url, ...bad })).toThrow(
        InvalidArgumentError,
      )
    }
  })

  it('refuses a count above MAX_IDS_PER_CALL at once, without touching Redis', async () => {
    const keyPrefix = `${prefix}count:`
    const source = open({ servers: a.url, keyPrefix })
    await expect(source.nextIds(0, 1e9)).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(source.nextIdsWithServer(0, 0)).rejects.toBeInstanceOf(InvalidArgumentError)
    expect(await admin(a.url).keys(`${keyPrefix}*`)).toEqual([])
  })

  it('refuses a shard outside the logical shards', async () => {
    await expect(open().nextId(2000)).rejects.toMatchObject({ code: 'SHARD_OUT_OF_RANGE' })
  })
})

describe('RedisSource records the sharding on every server', () => {
  it('records it on every server at first use and refuses a source with another logicalShards', async () => {
    const keyPrefix = `${prefix}sharding:`
    await open({ keyPrefix }).nextIds(3, 10)
    for (const url of [a.url, b.url]) {
      const recorded = JSON.parse((await admin(url).get(`${keyPrefix}sharding`))!)
      expect(sharding.equals(recorded)).toBe(true)
    }
    const other = open({
      keyPrefix,
      sharding: defineSharding({ layout: instagram, logicalShards: 64 }),
    })
    const error = await failure(other.nextId(3))
    expect(error).toBeInstanceOf(ShardingMismatchError)
    expect(error.message).toContain('logicalShards 64')
  })

  it('refuses a sharding recorded by another process, even when only the sharding key is there', async () => {
    const keyPrefix = `${prefix}recorded:`
    const recorded = defineSharding({ layout: instagram, logicalShards: 4096 })
    await admin(b.url).set(`${keyPrefix}sharding`, JSON.stringify(recorded.toJSON()))
    // Failover tries the other server when the first is down, but a mismatch is not a failure
    // of the server: it is refused at once.
    const error = await failure(open({ keyPrefix, servers: b.url }).nextId(1))
    expect(error).toBeInstanceOf(ShardingMismatchError)
    expect(await admin(b.url).exists(`${keyPrefix}shard:1`)).toBe(0)
  })

  it('re-records it after FLUSHALL, and issues no ID twice across the flush', async () => {
    const server = await fixture.server()
    const keyPrefix = `${prefix}flush:`
    const source = open({ servers: server.url, keyPrefix, maxDriftMs: 50 })
    const before = await source.nextIds(9, 20_000)
    const client = admin(server.url)
    await client.flushall()
    const after = await source.nextIds(9, 20_000)
    expect(new Set([...before, ...after]).size).toBe(40_000)
    expect(after[0]! > before.at(-1)!).toBe(true)
    expect(sharding.equals(JSON.parse((await client.get(`${keyPrefix}sharding`))!))).toBe(true)
    // A process with another sharding that never saw the key is refused by the stamp.
    await client.del(`${keyPrefix}sharding`)
    const other = open({
      servers: server.url,
      keyPrefix,
      maxDriftMs: 50,
      sharding: defineSharding({ layout: instagram, logicalShards: 100 }),
    })
    await expect(other.nextId(9)).rejects.toBeInstanceOf(ShardingMismatchError)
  })
})

describe('RedisSource tells overload, a clock behind and exhaustion apart', () => {
  it('reports a shard whose capacity stays used up as ShardOverloadedError, not a clock fault', async () => {
    const frozen = Date.now() + 400_000
    const source = open({
      servers: a.url,
      keyPrefix: `${prefix}overload:`,
      maxDriftMs: 10,
      clock: () => frozen, // the clock does not move: nobody frees capacity
      sleep: async () => {},
    })
    const error = await failure(source.nextIds(1, 50_000))
    expect(error).toBeInstanceOf(ShardOverloadedError)
    expect(error.code).toBe('SHARD_OVERLOADED')
    expect(error.retryable).toBe(true)
    expect(error.message).not.toMatch(/fix the clock/i)
  })

  it('reports a clock far behind the state as ClockMovedBackwardsError', async () => {
    const clock = fakeClock(Date.now() + 500_000)
    const source = open({
      servers: a.url,
      keyPrefix: `${prefix}behind:`,
      maxDriftMs: 10,
      clock: clock.read,
      sleep: clock.sleep,
    })
    await source.nextIds(1, 100)
    clock.now -= 500
    await expect(source.nextId(1)).rejects.toBeInstanceOf(ClockMovedBackwardsError)
  })

  it('reports a layout whose time field runs out as TimeExhaustedError, issuing nothing past it', async () => {
    const now = Date.now()
    const layout = defineLayout({
      name: 'short',
      epoch: now - 2 ** 30 + 200,
      timeBits: 30,
      shardBits: 13,
      sequenceBits: 10,
    })
    const clock = fakeClock(now)
    const source = open({
      servers: a.url,
      keyPrefix: `${prefix}exhausted:`,
      sharding: defineSharding({ layout, logicalShards: 100 }),
      maxDriftMs: 10,
      clock: clock.read,
      sleep: clock.sleep,
    })
    const early = await source.nextIds(2, 1_000)
    expect(early).toHaveLength(1_000)
    clock.now = now + 195
    const error = await failure(source.nextIds(2, 50_000))
    expect(error).toBeInstanceOf(TimeExhaustedError)
    const state = Number(await admin(a.url).get(`${prefix}exhausted:shard:2`))
    expect(Math.floor(state / 1024)).toBeLessThan(layout.timeLimit)
  })
})

describe('RedisSource with a server that is stopped or killed', () => {
  it('serves every caller from the other server while one is stopped (SIGSTOP), within timeoutMs', async () => {
    const keyPrefix = `${prefix}stopped:`
    const source = open({ keyPrefix, timeoutMs: 300, retryAfterMs: 60_000 })
    const [nameA, nameB] = source.serverNames as [string, string]
    expect((await source.nextIdWithServer(5)).server).toBe(nameA)
    await a.kill('SIGSTOP')
    try {
      // These calls complete while A is still stopped: nothing waits for it beyond timeoutMs.
      const served = await Promise.all(
        Array.from({ length: 8 }, () => source.nextIdsWithServer(5, 100)),
      )
      for (const { servers } of served) expect(new Set(servers)).toEqual(new Set([nameB]))
      const ids = served.flatMap(({ ids }) => ids)
      expect(new Set(ids).size).toBe(800)
      // With A alone, the call gives up after timeoutMs.
      const alone = open({ keyPrefix, servers: [a.url, b.url], timeoutMs: 200 })
      await alone.nextId(6).catch(() => undefined) // may be served by B; A is then passed over
      const only = open({ keyPrefix: `${prefix}stopped-only:`, servers: a.url, timeoutMs: 200 })
      const error = await failure(only.nextId(6))
      expect(error).toBeInstanceOf(SourceUnavailableError)
      expect(error.cause).toBeInstanceOf(TimedOutError)
      // The caller's signal ends a call on a server that does not answer.
      const controller = new AbortController()
      const pending = failure(
        open({ keyPrefix: `${prefix}stopped-signal:`, servers: a.url, timeoutMs: 60_000 }).nextId(
          6,
          { signal: controller.signal },
        ),
      )
      controller.abort()
      expect(await pending).toBeInstanceOf(CancelledError)
    } finally {
      await a.kill('SIGCONT')
    }
    // A answers again once it is passed over no more.
    expect((await open({ keyPrefix }).nextIdWithServer(5)).server).toBe(nameA)
  })

  it('reports a killed server as refused or lost, and fails over to the other', async () => {
    const server = await fixture.server()
    const keyPrefix = `${prefix}killed:`
    const pair = open({ keyPrefix, servers: [server.url, b.url] })
    const single = open({ keyPrefix: `${prefix}killed-single:`, servers: server.url })
    const [killedName, otherName] = pair.serverNames as [string, string]
    expect((await pair.nextIdWithServer(1)).server).toBe(killedName)
    await single.nextId(1)
    await server.kill('SIGKILL')
    const served = await Promise.all(Array.from({ length: 4 }, () => pair.nextIdsWithServer(1, 50)))
    for (const { servers } of served) expect(new Set(servers)).toEqual(new Set([otherName]))
    const causes: unknown[] = []
    for (let i = 0; i < 3; i++) {
      const error = await failure(single.nextId(1))
      expect(error).toBeInstanceOf(SourceUnavailableError)
      causes.push(error.cause)
    }
    for (const cause of causes) {
      expect(cause instanceof ConnectionRefusedError || cause instanceof ConnectionLostError).toBe(
        true,
      )
      expect((cause as Error).cause).toBeDefined()
    }
    // A client that never reached the server reports it refused.
    const fresh = open({ keyPrefix, servers: server.url })
    const refused = await failure(fresh.nextId(1))
    expect(refused.cause).toBeInstanceOf(ConnectionRefusedError)
  })

  it('honours a signal that is already aborted, before any work', async () => {
    const controller = new AbortController()
    controller.abort()
    await expect(open().nextId(1, { signal: controller.signal })).rejects.toBeInstanceOf(
      CancelledError,
    )
  })
})
