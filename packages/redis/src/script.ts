import { createHash } from 'node:crypto'

/**
 * The Lua script behind {@link RedisSource}. It counts in "ID space": per shard it keeps the last
 * issued counter `c = time * 2^sequenceBits + sequence` and hands out the next `n` values of its
 * residue class (`c ≡ offset (mod step)`, the INCRBY offsets and step of the classic
 * multi-server Redis generator), never below the clock,
 * never more than `maxDrift` time units ahead of it.
 *
 * KEYS[1] per-shard state (a string holding the last counter), KEYS[2] the server's config stamp.
 * ARGV: 1 n, 2 step, 3 offset, 4 config stamp, 5 epoch ms, 6 time unit ms, 7 2^sequenceBits,
 * 8 max drift in time units, 9 client floor counter (-1 for none), 10 time override in ms ('' =
 * the server's TIME).
 *
 * Returns `{first, granted, now}`: counters `first, first + step, ...` (`granted` of them; 0 when
 * the caller must wait until the clock reaches `floor(first / 2^sequenceBits) - maxDrift`), and the
 * time (in units) the script used. Lua numbers are doubles: counters stay below 2^53 because the
 * source refuses layouts with more than 52 time + sequence bits.
 *
 * A missing state (first use, or Redis restarted or evicted the key) is not trusted to start at
 * the clock: IDs issued before the loss may run up to `maxDrift` ahead of the clock, so a fresh
 * state starts at `now + maxDrift + 1`: the first caller waits one time unit, and the shard's
IDs run up to `maxDrift` ahead of the clock until it catches up.
 * @internal
 */
export const ID_SCRIPT = `
local n = tonumber(ARGV[1])
local step = tonumber(ARGV[2])
local offset = tonumber(ARGV[3])
local stamp = redis.call('GET', KEYS[2])
if stamp ~= ARGV[4] then
  if stamp then
    return redis.error_reply('SHARDFLAKE_CONFIG ' .. stamp)
  end
  redis.call('SET', KEYS[2], ARGV[4])
end
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
local last = tonumber(redis.call('GET', KEYS[1]) or '')
if not last then
  last = limit
  redis.call('SET', KEYS[1], last)
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
local granted = 0
if first <= limit then
  granted = math.min(n, math.floor((limit - first) / step) + 1)
  redis.call('SET', KEYS[1], first + (granted - 1) * step)
end
return {first, granted, now}
`

/** SHA1 of {@link ID_SCRIPT}, as `SCRIPT LOAD` returns it. @internal */
export const ID_SCRIPT_SHA = createHash('sha1').update(ID_SCRIPT).digest('hex')
