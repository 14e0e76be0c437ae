import {
  allWorkersHeld,
  type LeaseRecord,
  type LeaseRegistry,
  type LeaseRequest,
  leaseLost,
  NoFreeLeaseError,
  registryCall,
  type Sharding,
  type ShardingDescription,
  type WorkerLease,
} from '@shardflake/core'
import type { Redis } from 'ioredis'

/** What {@link RedisLeaseRegistry} takes besides the connection. */
export interface RedisLeaseRegistryOptions {
  /** Prefix of the registry's keys. @default 'shardflake:' */
  readonly keyPrefix?: string
  /**
   * Workers never leased: those a `RedisSource` or a database function writes into its IDs.
   * @default [0]
   */
  readonly reservedWorkers?: readonly number[]
  /**
   * How long a registry found empty (new, flushed, or restarted without persistence) waits
   * before its first grant, in ms: long enough that every holder of before has stopped. Set 0
   * only when you know no process held a lease from this registry's keys before.
   * @default the requested lease's TTL
   */
  readonly emptyRegistryWaitMs?: number
}

// Every script reads the server's clock (TIME), so expiry never depends on holders' clocks.
const NOW = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`

/** KEYS[1] prefix; ARGV holder, ttl, highWater, workerCount, reserved ("0,3"), graceMs. */
const ACQUIRE = `${NOW}
local prefix = KEYS[1]
local born = tonumber(redis.call('GET', prefix .. 'lease:born') or '')
if not born then
  born = now
  redis.call('SET', prefix .. 'lease:born', born)
end
if now < born + tonumber(ARGV[6]) then return {-2, tostring(born + tonumber(ARGV[6]))} end
local reserved = {}
for w in string.gmatch(ARGV[5], '%d+') do reserved[tonumber(w)] = true end
local chosen = -1
for w = 0, tonumber(ARGV[4]) - 1 do
  if not reserved[w] then
    local key = prefix .. 'lease:' .. w
    local holder = redis.call('HGET', key, 'holder')
    if not holder or holder == '' then chosen = w break end
    if chosen < 0 and tonumber(redis.call('HGET', key, 'expires') or '0') < now then chosen = w end
  end
end
if chosen < 0 then return {-1} end
local key = prefix .. 'lease:' .. chosen
local previous = tonumber(redis.call('HGET', key, 'hw') or '0')
local token = redis.call('INCR', prefix .. 'lease:token')
redis.call('HSET', key, 'holder', ARGV[1], 'token', token, 'expires', now + tonumber(ARGV[2]),
  'hw', math.max(previous, tonumber(ARGV[3])))
return {chosen, token, tostring(previous)}`

/** KEYS[1] prefix; ARGV worker, token, ttl, highWater. */
const RENEW = `${NOW}
local key = KEYS[1] .. 'lease:' .. ARGV[1]
local holder = redis.call('HGET', key, 'holder')
if not holder or holder == '' or redis.call('HGET', key, 'token') ~= ARGV[2] then return 0 end
local hw = math.max(tonumber(redis.call('HGET', key, 'hw') or '0'), tonumber(ARGV[4]))
redis.call('HSET', key, 'expires', now + tonumber(ARGV[3]), 'hw', hw)
return 1`

/** KEYS[1] prefix; ARGV worker, token, issued. */
const RELEASE = `
local key = KEYS[1] .. 'lease:' .. ARGV[1]
if redis.call('HGET', key, 'token') ~= ARGV[2] then return 0 end
redis.call('HSET', key, 'holder', '', 'expires', 0, 'hw', ARGV[3])
return 1`

/**
 * Worker leases in Redis, for {@link LeasedSource}: one hash per worker, changed only by Lua
 * scripts that read the server's clock. Keep the registry on a Redis with persistence
 * (`appendonly yes`): its high-water marks are what lets the next holder start above the last
 * one. A registry that comes back empty grants nothing for one TTL, so every holder of before has
 * stopped before anyone starts again.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis'
 * import { LeasedSource, type Sharding } from '@shardflake/core'
 * import { RedisLeaseRegistry } from '@shardflake/redis'
 * declare const sharding: Sharding // a layout with worker bits
 *
 * const registry = new RedisLeaseRegistry(new Redis(process.env.REDIS_URL!))
 * const source = await LeasedSource.start({ sharding, registry })
 * ```
 */
export class RedisLeaseRegistry implements LeaseRegistry {
  private readonly prefix: string
  private readonly reserved: string
  private readonly emptyWaitMs: number | undefined
  private checked: Sharding | undefined

  constructor(
    private readonly redis: Redis,
    options: RedisLeaseRegistryOptions = {},
  ) {
    this.prefix = options.keyPrefix ?? 'shardflake:'
    this.reserved = (options.reservedWorkers ?? [0]).join(',')
    this.emptyWaitMs = options.emptyRegistryWaitMs
  }

  async acquire(request: LeaseRequest): Promise<WorkerLease> {
    await this.checkSharding(request.sharding)
    const reply = (await registryCall(() =>
      this.redis.eval(
        ACQUIRE,
        1,
        this.prefix,
        request.holder,
        request.ttlMs,
        Math.ceil(request.highWaterMs),
        request.sharding.layout.workerCount,
        this.reserved,
        this.emptyWaitMs ?? request.ttlMs,
      ),
    )) as [number, (number | string)?, string?]
    if (reply[0] === -2) {
      throw new NoFreeLeaseError(
        `The lease registry at ${this.prefix} was empty (new, flushed or restarted without persistence): it grants no lease until ${new Date(Number(reply[1])).toISOString()}, one TTL later, so that every earlier holder has stopped.`,
      )
    }
    if (reply[0] < 0) {
      throw allWorkersHeld(request, this.reserved)
    }
    return {
      worker: reply[0],
      token: BigInt(reply[1]!),
      holder: request.holder,
      startAfterMs: Number(reply[2]),
      ttlMs: request.ttlMs,
    }
  }

  async renew(lease: WorkerLease, highWaterMs: number): Promise<void> {
    const held = await registryCall(() =>
      this.redis.eval(
        RENEW,
        1,
        this.prefix,
        lease.worker,
        lease.token.toString(),
        lease.ttlMs,
        Math.ceil(highWaterMs),
      ),
    )
    if (held !== 1) {
      throw leaseLost(lease)
    }
  }

  async release(lease: WorkerLease, issuedMs: number): Promise<void> {
    await registryCall(() =>
      this.redis.eval(
        RELEASE,
        1,
        this.prefix,
        lease.worker,
        lease.token.toString(),
        Number.isFinite(issuedMs) ? Math.ceil(issuedMs) : 0,
      ),
    )
  }

  async list(): Promise<LeaseRecord[]> {
    const keys = await registryCall(() => this.redis.keys(`${this.prefix}lease:[0-9]*`))
    const records: LeaseRecord[] = []
    for (const key of keys) {
      const hash = await registryCall(() => this.redis.hgetall(key))
      const held = hash.holder !== undefined && hash.holder !== ''
      records.push({
        worker: Number(key.slice(`${this.prefix}lease:`.length)),
        holder: held ? hash.holder! : null,
        token: BigInt(hash.token ?? 0),
        expiresAt: held ? new Date(Number(hash.expires)) : null,
        highWaterMs: Number(hash.hw ?? 0),
      })
    }
    return records.sort((a, b) => a.worker - b.worker)
  }

  async free(worker: number): Promise<void> {
    await registryCall(() =>
      this.redis.hset(`${this.prefix}lease:${worker}`, 'holder', '', 'expires', 0),
    )
  }

  /** The registry does not own the connection: quit it yourself. */
  async close(): Promise<void> {}

  private async checkSharding(sharding: Sharding): Promise<void> {
    if (this.checked === sharding) return
    const key = `${this.prefix}lease:sharding`
    await registryCall(() => this.redis.set(key, JSON.stringify(sharding.toJSON()), 'NX'))
    const recorded = JSON.parse(
      (await registryCall(() => this.redis.get(key))) ?? 'null',
    ) as ShardingDescription | null
    if (recorded) sharding.checkSame(recorded, `The lease registry at ${this.prefix}`)
    this.checked = sharding
  }
}
