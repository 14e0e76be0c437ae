import { describeIdSource } from '@shardflake/conformance'
import { afterAll, beforeAll } from 'vitest'
import { RedisSource } from '../src'
import { sharding } from './helpers'
import {
  deletePrefix,
  runTag,
  sharedRedisUrl,
  startRedis,
  type ThrowawayServer,
} from './redis-servers'

const single = `sf:redis:conformance:single:${runTag}:`
const multi = `sf:redis:conformance:multi:${runTag}:`
let throwaway: ThrowawayServer[] = []
const urls = () => [sharedRedisUrl, ...throwaway.map((server) => server.url)]

beforeAll(async () => {
  throwaway = await Promise.all([startRedis(), startRedis()])
})
afterAll(async () => {
  await Promise.all(throwaway.map((server) => server.stop()))
})

describeIdSource('RedisSource (one server)', {
  sharding,
  create: () => new RedisSource({ sharding, servers: sharedRedisUrl, keyPrefix: single }),
  shards: [5, 1341],
  largeBatch: 50_000,
  teardown: () => deletePrefix(sharedRedisUrl, single),
})

describeIdSource('RedisSource (three servers, round-robin)', {
  sharding,
  create: () =>
    new RedisSource({ sharding, servers: urls(), keyPrefix: multi, strategy: 'round-robin' }),
  shards: [7, 1999],
  foreignShard: 2000,
  teardown: () => deletePrefix(sharedRedisUrl, multi),
})
