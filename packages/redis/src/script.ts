import { createHash } from 'node:crypto'
import type { Sharding } from '@shardflake/core'

/**
 * The Lua script behind {@link RedisSource}. It counts in "ID space": per shard it keeps the last
 * issued counter `c = time * 2^sequenceBits + sequence` and hands out the next `n` values of its
 * residue class (`c ≡ offset (mod step)`, the INCRBY offsets and step of the classic
 * multi-server Redis generator), never below the clock, never more than `maxDrift` time units
 * ahead of it, never at or past the layout's time limit.
 *
 * KEYS[1] per-shard state (a string holding the last counter), KEYS[2] the server's config stamp,
 * KEYS[3] the recorded sharding (JSON). ARGV: 1 n, 2 step, 3 offset, 4 config stamp, 5 epoch ms,
 * 6 time unit ms, 7 2^sequenceBits, 8 max drift in time units, 9 client floor counter (-1 for
 * none), 10 time override in ms ('' = the server's TIME), 11 time limit in units, 12 sharding JSON
 * ('' until the server asks for it: a server without a stamp answers `UNSTAMPED` to a call
 * without it, so the description is sent once per new or flushed prefix, not with every call).
 *
 * Returns `{status, first, granted, now}` (see {@link ScriptStatus}); for `CONFIG`,
 * `{status, recordedStamp}`; for `UNSTAMPED`, `{status}`. Lua numbers are doubles: counters stay below 2^53 because the source
 * refuses layouts with more than 52 time + sequence bits.
 *
 * A missing state (first use, or Redis restarted or evicted the key) is not trusted to start at
 * the clock: IDs issued before the loss may run up to `maxDrift` ahead of the clock, so a fresh
 * state starts at `now + maxDrift + 1`: the first caller waits one time unit, and the shard's
 * IDs run up to `maxDrift` ahead of the clock until it catches up.
 *
 * Why `BEHIND` is told from `FULL` by the wait alone: the state is never set above the limit of
 * the call that set it, so while the clock does not go back, the next counter is at most one
 * time unit past the current limit. A wait of two units or more means some earlier call saw a
 * later clock.
 */
export const ID_SCRIPT = `
local stamp = redis.call('GET', KEYS[2])
if stamp ~= ARGV[4] then
  if stamp then
    return {4, stamp}
  end
  if ARGV[12] == '' then
    return {5}
  end
  redis.call('SET', KEYS[2], ARGV[4])
  redis.call('SET', KEYS[3], ARGV[12], 'NX')
end
local n = tonumber(ARGV[1])
local step = tonumber(ARGV[2])
local offset = tonumber(ARGV[3])
local ms
if ARGV[10] ~= '' then
  ms = tonumber(ARGV[10])
else
  local t = redis.call('TIME')
  ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local unit = tonumber(ARGV[6])
local span = tonumber(ARGV[7])
local drift = tonumber(ARGV[8])
local now = math.floor((ms - tonumber(ARGV[5])) / unit)
local limit = (now + drift + 1) * span - 1
local cap = tonumber(ARGV[11]) * span - 1
local last = tonumber(redis.call('GET', KEYS[1]) or '')
if not last then
  last = limit
  redis.call('SET', KEYS[1], last)
end
if limit > cap then
  limit = cap
end
local first = last + step
if first < now * span then
  first = now * span
end
local floor = tonumber(ARGV[9])
if floor >= 0 and first <= floor then
  first = floor + 1
end
first = first + (offset - first) % step
if first > cap then
  return {3, first, 0, now}
end
if first > limit then
  if math.floor(first / span) - drift - now > 1 then
    return {2, first, 0, now}
  end
  return {1, first, 0, now}
end
local granted = math.min(n, math.floor((limit - first) / step) + 1)
redis.call('SET', KEYS[1], first + (granted - 1) * step)
return {0, first, granted, now}
`

/** SHA1 of {@link ID_SCRIPT}, as `SCRIPT LOAD` returns it. */
export const ID_SCRIPT_SHA = createHash('sha1').update(ID_SCRIPT).digest('hex')

/** What the script's first reply element says. */
export const ScriptStatus = {
  /** `granted` counters from `first` were issued. */
  GRANTED: 0,
  /** The shard's drift allowance is used up: wait one time unit (capacity, not a clock fault). */
  FULL: 1,
  /** The state is two or more units past the allowance: the clock went back (or lags a peer's). */
  BEHIND: 2,
  /** The next counter's time reached the layout's limit. */
  EXHAUSTED: 3,
  /** The server serves this prefix with another configuration stamp. */
  CONFIG: 4,
  /** The prefix has no stamp yet (new, or flushed): call again with the sharding description. */
  UNSTAMPED: 5,
} as const

/** One reply of the script. */
export type ScriptReply =
  | { status: 0 | 1 | 2 | 3; first: number; granted: number; now: number }
  | { status: 4; stamp: string }
  | { status: 5 }

/** A reply that is not `CONFIG`. */
export type GrantReply = Extract<ScriptReply, { status: 0 | 1 | 2 | 3 }>

/** Reads the script's reply array. */
export function readReply(reply: unknown): ScriptReply {
  const [status, a, granted, now] = reply as [number, number | string, number, number]
  if (status === ScriptStatus.CONFIG) return { status, stamp: String(a) }
  if (status === ScriptStatus.UNSTAMPED) return { status }
  return { status: status as 0 | 1 | 2 | 3, first: Number(a), granted, now }
}

/**
 * The configuration stamp one server records under the prefix: the sharding (the fields
 * `Sharding.equals` compares), the drift and this server's place in the list. Processes that
 * send another stamp are refused by the script.
 */
export function configStamp(sharding: Sharding, driftUnits: number, place: string): string {
  return ['shardflake-v2', `sharding=${shardingPart(sharding)}`, `drift=${driftUnits}`, place].join(
    ';',
  )
}

/** The sharding part of a stamp, or `undefined` when the stamp has none. */
export function stampSharding(stamp: string): string | undefined {
  return stamp
    .split(';')
    .find((part) => part.startsWith('sharding='))
    ?.slice('sharding='.length)
}

/** The sharding as a stamp part. */
export function shardingPart(sharding: Sharding): string {
  const { layout } = sharding
  return [
    layout.epoch,
    layout.timeUnitMs,
    `${layout.timeBits}/${layout.shardBits}/${layout.workerBits}/${layout.sequenceBits}`,
    layout.order.join('.'),
    sharding.logicalShards,
  ].join(',')
}
