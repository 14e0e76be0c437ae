import { describeIdSource } from '@shardflake/conformance'
import { instagram } from '@shardflake/core'
import { RedisSource } from '../src'
import { deletePrefix, extraPorts, sharedRedisUrl, urlOf } from './redis-servers'

const single = 'sf:redis:conformance:single:'
const multi = 'sf:redis:conformance:multi:'
const [portA, portB] = extraPorts() as [number, number]

describeIdSource('RedisSource (one server)', {
  create: () => new RedisSource({ layout: instagram, servers: sharedRedisUrl, keyPrefix: single }),
  shards: [5, 1341],
  largeBatch: 50_000,
  teardown: () => deletePrefix(sharedRedisUrl, single),
})

describeIdSource('RedisSource (three servers, round-robin)', {
  create: () =>
    new RedisSource({
      layout: instagram,
      servers: [sharedRedisUrl, urlOf(portA), urlOf(portB)],
      keyPrefix: multi,
      strategy: 'round-robin',
      logicalShards: 2000,
    }),
  shards: [7, 1999],
  foreignShard: 2000,
  teardown: async () => {
    for (const url of [sharedRedisUrl, urlOf(portA), urlOf(portB)]) await deletePrefix(url, multi)
  },
})
