import {
  allWorkersHeld,
  type LeaseRecord,
  type LeaseRegistry,
  type LeaseRegistryOptions,
  type LeaseRequest,
  leaseLost,
  lowerWhileHeld,
  maxTtlMismatch,
  readRegistryOptions,
  registryBehind,
  registryCall,
  registryWaiting,
  type Sharding,
  type ShardingDescription,
  SourceUnavailableError,
  ttlAboveMax,
  type WorkerLease,
  withDeadline,
} from '@shardflake/core'
import type { Redis } from 'ioredis'

/** What {@link RedisLeaseRegistry} takes besides the connection. */
export interface RedisLeaseRegistryOptions extends LeaseRegistryOptions {
  /** Prefix of the registry's keys. @default 'shardflake:' */
  readonly keyPrefix?: string
  /**
   * Workers never leased: those a `RedisSource` or a database function writes into its IDs.
   * @default [0]
   */
  readonly reservedWorkers?: readonly number[]
}

const KNOWN_OPTIONS = ['keyPrefix', 'reservedWorkers', 'maxTtlMs', 'timeoutMs']

// Every script reads the server's clock (TIME), so expiry never depends on holders' clocks.
// Numbers are written with %.0f: tokens (microseconds) have 16 digits.
const PRELUDE = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function num(x) return string.format('%.0f', x) end
local prefix = KEYS[1]
local reg = prefix .. 'lease:registry'`

/**
 * KEYS[1] prefix; ARGV holder, holderId, ttl, highWater, workerCount, reserved ("0,3"), maxTtl,
 * description, startBy. Replies {worker, token, startAfter, now}, {-1} (all held), {-2, until,
 * why} (waiting after a loss), {-3, recorded description}, {-4, recorded maxTtl}.
 */
const ACQUIRE = `${PRELUDE}
local maxTtl = tonumber(ARGV[7])
local workers = tonumber(ARGV[5])
local runId = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
local function keepWorkers()
  for w = 0, workers - 1 do redis.call('HSETNX', prefix .. 'lease:' .. w, 'hw', '0') end
end
local r = redis.call('HMGET', reg, 'description', 'maxTtl', 'runId', 'token', 'waitUntil')
if not r[1] then
  -- New, flushed, evicted or restarted without persistence: it cannot tell which, so it waits.
  local untilMs = now + maxTtl
  redis.call('HSET', reg, 'description', ARGV[8], 'maxTtl', ARGV[7], 'runId', runId,
    'token', num(nowUs), 'lostAt', num(now), 'waitUntil', num(untilMs))
  keepWorkers()
  return {-2, num(untilMs), 'was found empty (new, flushed, or restarted without persistence)'}
end
if r[1] ~= ARGV[8] then return {-3, r[1]} end
if tonumber(r[2]) ~= maxTtl then return {-4, r[2]} end
local waitUntil = tonumber(r[5] or '0')
local reserved = {}
for w in string.gmatch(ARGV[6], '%d+') do reserved[tonumber(w)] = true end
local startBy = tonumber(ARGV[9])
local lost = nil
if r[3] ~= runId then lost = 'restarted (it may have lost its last writes)' end
local chosen, rank, chosenHw = -1, 99, 0
for w = 0, workers - 1 do
  if not reserved[w] then
    local h = redis.call('HMGET', prefix .. 'lease:' .. w, 'holder', 'expires', 'hw')
    if not h[3] then lost = 'lost keys of its workers (evicted or deleted)' end
    local free = (not h[1]) or h[1] == ''
    if free or tonumber(h[2] or '0') < now then
      local hw = tonumber(h[3] or '0')
      local r2 = (hw > startBy and 2 or 0) + (free and 0 or 1)
      if r2 < rank then chosen, rank, chosenHw = w, r2, hw end
    end
  end
end
if lost then
  waitUntil = math.max(waitUntil, now + maxTtl)
  redis.call('HSET', reg, 'runId', runId, 'lostAt', num(now), 'waitUntil', num(waitUntil))
  keepWorkers()
  return {-2, num(waitUntil), lost}
end
if now < waitUntil then return {-2, num(waitUntil), 'found it may have lost data'} end
if chosen < 0 then return {-1} end
-- Never granted twice: at least the server's clock in microseconds, whatever it forgot.
local token = math.max(tonumber(r[4] or '0') + 1, nowUs)
redis.call('HSET', reg, 'token', num(token))
local start = math.max(chosenHw, waitUntil)
redis.call('HSET', prefix .. 'lease:' .. chosen, 'holder', ARGV[1], 'holderId', ARGV[2],
  'token', num(token), 'expires', num(now + tonumber(ARGV[3])), 'ttl', ARGV[3],
  'start', num(start), 'hw', num(math.max(start, tonumber(ARGV[4]))))
return {chosen, num(token), num(start), num(now)}`

/**
 * KEYS[1] prefix; ARGV worker, token, holderId, ttl, highWater, grantedAt. Replies {1} renewed,
 * {0} superseded, {-2, until} the registry is behind this lease's token (it lost data).
 */
const RENEW = `${PRELUDE}
local key = prefix .. 'lease:' .. ARGV[1]
local h = redis.call('HMGET', key, 'holder', 'holderId', 'token', 'hw')
if h[1] and h[1] ~= '' and h[2] == ARGV[3] and h[3] == ARGV[2] then
  redis.call('HSET', key, 'expires', num(now + tonumber(ARGV[4])),
    'hw', num(math.max(tonumber(h[4] or '0'), tonumber(ARGV[5]))))
  return {1}
end
local r = redis.call('HMGET', reg, 'token', 'lostAt', 'waitUntil', 'maxTtl')
local token = tonumber(ARGV[2])
if not r[1] then return {-2, '0'} end
if tonumber(r[1]) < token or tonumber(h[3] or '0') < token then
  local waitUntil = tonumber(r[3] or '0')
  -- A loss found after this grant already started a wait that covers it.
  if tonumber(r[2] or '0') < tonumber(ARGV[6]) then
    waitUntil = math.max(waitUntil, now + tonumber(r[4]))
    redis.call('HSET', reg, 'lostAt', num(now), 'waitUntil', num(waitUntil))
  end
  return {-2, num(waitUntil)}
end
return {0}`

/** KEYS[1] prefix; ARGV worker, token, holderId, issued. */
const RELEASE = `
local key = KEYS[1] .. 'lease:' .. ARGV[1]
local h = redis.call('HMGET', key, 'holder', 'holderId', 'token', 'start')
if not h[1] or h[1] == '' or h[2] ~= ARGV[3] or h[3] ~= ARGV[2] then return 0 end
redis.call('HSET', key, 'holder', '', 'holderId', '', 'expires', '0',
  'hw', string.format('%.0f', math.max(tonumber(ARGV[4]), tonumber(h[4] or '0'))))
return 1`

/** KEYS[1] prefix; ARGV worker. */
const FREE = `
local key = KEYS[1] .. 'lease:' .. ARGV[1]
if redis.call('EXISTS', key) == 0 then return 0 end
redis.call('HSET', key, 'holder', '', 'holderId', '', 'expires', '0')
return 1`

/** KEYS[1] prefix. Replies the end of the wait, or false when the registry holds nothing. */
const QUARANTINE = `${PRELUDE}
local r = redis.call('HMGET', reg, 'maxTtl', 'waitUntil')
if not r[1] then return false end
local waitUntil = math.max(tonumber(r[2] or '0'), now + tonumber(r[1]))
redis.call('HSET', reg, 'lostAt', num(now), 'waitUntil', num(waitUntil))
return num(waitUntil)`

/** KEYS[1] prefix; ARGV maxTtl. Replies 1 recorded, 0 refused (a live lease is longer), -1 nothing recorded yet. */
const RECORD_MAX_TTL = `${PRELUDE}
local recorded = redis.call('HGET', reg, 'maxTtl')
if not recorded then return -1 end
local wanted = tonumber(ARGV[1])
if wanted < tonumber(recorded) then
  for _, key in ipairs(redis.call('KEYS', prefix .. 'lease:[0-9]*')) do
    local h = redis.call('HMGET', key, 'holder', 'expires', 'ttl')
    if h[1] and h[1] ~= '' and tonumber(h[2] or '0') > now and tonumber(h[3] or '0') > wanted then
      return 0
    end
  end
end
redis.call('HSET', reg, 'maxTtl', ARGV[1])
return 1`

/**
 * Worker leases in Redis, for {@link LeasedSource}: one hash per worker, changed only by Lua
 * scripts that read the server's clock. Renewals and releases are fenced by the worker, the
 * token and the holder's id. Every call gives up after `timeoutMs`.
 *
 * A Redis registry cannot tell a new key prefix from one whose keys were lost, so whenever it
 * finds its keys missing (the first use, `FLUSHALL`, eviction, a restart without persistence) or
 * its server restarted (it may have lost its last writes), it grants nothing for `maxTtlMs` on
 * the server's clock, and grants after that start above the end of that wait: every holder it
 * forgot has stopped at its high-water mark by then. The first start of an application on a new
 * registry therefore waits `maxTtlMs` (10 s by default). Keep it on a Redis with persistence
 * (`appendonly yes`) and `maxmemory-policy noeviction`.
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
  readonly maxTtlMs: number
  private readonly timeoutMs: number
  private readonly prefix: string
  private readonly reserved: string

  /** @throws InvalidArgumentError for unknown options or values out of bounds. */
  constructor(
    private readonly redis: Redis,
    options: RedisLeaseRegistryOptions = {},
  ) {
    const settings = readRegistryOptions('RedisLeaseRegistry options', options, KNOWN_OPTIONS, [0])
    this.maxTtlMs = settings.maxTtlMs
    this.timeoutMs = settings.timeoutMs
    this.prefix = options.keyPrefix ?? 'shardflake:'
    this.reserved = settings.reservedWorkers.join(',')
  }

  async acquire(request: LeaseRequest): Promise<WorkerLease> {
    if (request.ttlMs > this.maxTtlMs) throw ttlAboveMax(request, this.maxTtlMs)
    let description = await this.recordedDescription(request.sharding)
    for (let attempt = 0; ; attempt++) {
      const reply = (await this.call(() =>
        this.redis.eval(
          ACQUIRE,
          1,
          this.prefix,
          request.holder,
          request.holderId,
          request.ttlMs,
          Math.ceil(request.highWaterMs),
          request.sharding.layout.workerCount,
          this.reserved,
          this.maxTtlMs,
          description,
          Math.floor(request.startByMs),
        ),
      )) as [number, string?, string?, string?]
      const [code, first, second, third] = reply
      if (code === -3) {
        // Recorded meanwhile by another process: the same sharding (then asked again with its
        // text), or refused here.
        description = this.checkRecorded(request.sharding, first!)
        if (attempt < 3) continue
        throw new SourceUnavailableError(
          `${this.what()} recorded its sharding again while this process asked for a lease (its keys are being deleted?). Retry.`,
        )
      }
      if (code === -4) throw maxTtlMismatch(this.what(), Number(first), this.maxTtlMs)
      if (code === -2) throw registryWaiting(this.what(), second!, new Date(Number(first)))
      if (code === -1) throw allWorkersHeld(request, this.reserved)
      return {
        worker: code,
        token: BigInt(first!),
        holder: request.holder,
        holderId: request.holderId,
        startAfterMs: Number(second),
        ttlMs: request.ttlMs,
        grantedAtMs: Number(third),
      }
    }
  }

  async renew(lease: WorkerLease, highWaterMs: number): Promise<void> {
    const [code, until] = (await this.call(() =>
      this.redis.eval(
        RENEW,
        1,
        this.prefix,
        lease.worker,
        lease.token.toString(),
        lease.holderId,
        lease.ttlMs,
        Math.ceil(highWaterMs),
        lease.grantedAtMs,
      ),
    )) as [number, string?]
    if (code === 1) return
    if (code === -2) {
      throw registryBehind(lease, Number(until) > 0 ? new Date(Number(until)) : null)
    }
    throw leaseLost(lease)
  }

  async release(lease: WorkerLease, issuedMs: number): Promise<void> {
    await this.call(() =>
      this.redis.eval(
        RELEASE,
        1,
        this.prefix,
        lease.worker,
        lease.token.toString(),
        lease.holderId,
        Number.isFinite(issuedMs) ? Math.max(0, Math.ceil(issuedMs)) : 0,
      ),
    )
  }

  async list(): Promise<LeaseRecord[]> {
    const keys = await this.call(() => this.redis.keys(`${this.prefix}lease:[0-9]*`))
    const records: LeaseRecord[] = []
    for (const key of keys) {
      const hash = await this.call(() => this.redis.hgetall(key))
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
    await this.call(() => this.redis.eval(FREE, 1, this.prefix, worker))
  }

  async quarantine(): Promise<Date | null> {
    const until = (await this.call(() => this.redis.eval(QUARANTINE, 1, this.prefix))) as
      | string
      | null
    return until === null ? null : new Date(Number(until))
  }

  async recordMaxTtl(): Promise<void> {
    const done = await this.call(() =>
      this.redis.eval(RECORD_MAX_TTL, 1, this.prefix, this.maxTtlMs),
    )
    if (done === 0) throw lowerWhileHeld(this.what(), this.maxTtlMs)
  }

  /** The registry does not own the connection: quit it yourself. */
  async close(): Promise<void> {}

  private what(): string {
    return `The lease registry at ${this.prefix}`
  }

  /** The sharding recorded in the registry (checked against this one), or this one's. */
  private async recordedDescription(sharding: Sharding): Promise<string> {
    const recorded = await this.call(() =>
      this.redis.hget(`${this.prefix}lease:registry`, 'description'),
    )
    return recorded === null
      ? JSON.stringify(sharding.toJSON())
      : this.checkRecorded(sharding, recorded)
  }

  private checkRecorded(sharding: Sharding, recorded: string): string {
    sharding.checkSame(JSON.parse(recorded) as ShardingDescription, this.what())
    return recorded
  }

  /** One command within `timeoutMs`; a server that does not answer fails it with TimedOutError. */
  private call<T>(command: () => Promise<T>): Promise<T> {
    return registryCall(() =>
      withDeadline(command, { timeoutMs: this.timeoutMs, what: this.what() }),
    )
  }
}
