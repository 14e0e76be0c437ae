import { Layout } from './layout'

/**
 * Instagram's layout (2011): 41 bits of ms since 2011-08-24T21:07:01.721Z, 13 bits of logical
 * shard (8192), 10 bits of sequence (1024 IDs per ms per shard). Lasts until 2081; its IDs turn
 * negative in a signed BIGINT on 2046-06-27, where generation stops unless you opt in.
 */
export const instagram: Layout = new Layout({
  name: 'instagram',
  epoch: 1314220021721,
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
})

/**
 * Twitter Snowflake (decode only): 41 bits of ms since 2010-11-04T01:42:54.657Z, 5 bits of
 * datacenter (read as `shard`), 5 bits of worker, 12 bits of sequence; bit 63 unused.
 */
export const twitter: Layout = new Layout({
  name: 'twitter',
  epoch: 1288834974657,
  timeBits: 41,
  shardBits: 5,
  workerBits: 5,
  sequenceBits: 12,
  decodeOnly: true,
})

/**
 * Discord snowflakes (decode only): 42 bits of ms since 2015-01-01, 5 bits of internal worker
 * (read as `shard`), 5 bits of internal process (read as `worker`), 12 bits of increment.
 */
export const discord: Layout = new Layout({
  name: 'discord',
  epoch: 1420070400000,
  timeBits: 42,
  shardBits: 5,
  workerBits: 5,
  sequenceBits: 12,
  allowSignBit: true,
  decodeOnly: true,
})

/**
 * Sonyflake (decode only): 39 bits of 10 ms units since 2014-09-01, then 8 bits of sequence,
 * then 16 bits of machine id (read as `worker`); no shard field.
 */
export const sonyflake: Layout = new Layout(
  {
    name: 'sonyflake',
    epoch: 1409529600000,
    timeUnitMs: 10,
    timeBits: 39,
    shardBits: 0,
    sequenceBits: 8,
    workerBits: 16,
    order: ['time', 'sequence', 'worker', 'shard'],
    decodeOnly: true,
  },
  { allowEmptyShard: true },
)

/** Every preset by name, for CLIs and configuration files. */
export const presets: Readonly<Record<'instagram' | 'twitter' | 'discord' | 'sonyflake', Layout>> =
  Object.freeze({ instagram, twitter, discord, sonyflake })
