import { defineSharding, instagram, type ShardHomes, ShardMap } from '@shardflake/core'

/** The sharding of the router tests: 64 logical shards over three servers. */
export const sharding = defineSharding({ layout: instagram, logicalShards: 64 })

/** Shards 0-20 on server a, 21-41 on b, 42-63 on c. */
export const map = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])

/** The server holding a logical shard. */
export const homeOf = (shard: number) => map.targetFor(shard)

/**
 * Closes what a router test opened: the homes and every server's Prisma client, the source, and
 * the servers (any of them left unset by a failed setup).
 */
export async function closeHomes(
  homes: ShardHomes<{ $disconnect(): Promise<void> }> | undefined,
  source: { close(): void } | undefined,
  servers: { close(): Promise<void> } | undefined,
): Promise<void> {
  await homes?.close()
  for (const name of homes?.serverNames ?? []) await homes!.handleOf(name).$disconnect()
  source?.close()
  await servers?.close()
}
