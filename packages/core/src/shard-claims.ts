import { ShardConflictError } from './errors'
import type { Sharding } from './sharding'

/**
 * Which in-process generators make IDs for which shards, in this process. Kept on `globalThis`
 * so that two copies of this package (two bundles, a CommonJS and an ESM copy) share it.
 */
interface ClaimRegistry {
  /** Key: layout key + shard + worker. Value: the owner. */
  readonly owners: Map<string, object>
  /** The last time (layout units) a closed generator issued for a key. */
  readonly lastTimes: Map<string, number>
}

const REGISTRY = Symbol.for('shardflake.shard-claims')

function registry(): ClaimRegistry {
  const global = globalThis as { [REGISTRY]?: ClaimRegistry }
  global[REGISTRY] ??= { owners: new Map(), lastTimes: new Map() }
  return global[REGISTRY]
}

function keyOf(sharding: Sharding, shard: number, worker: number): string {
  const { layout } = sharding
  return `${layout.epoch}/${layout.timeUnitMs}/${layout.timeBits}/${layout.shardBits}/${layout.workerBits}/${layout.sequenceBits}:${shard}:${worker}`
}

/**
 * Claims `shards` (with `worker`) for `owner` in this process, all or none.
 * @throws ShardConflictError when another live owner holds one of them.
 */
export function claimShards(
  owner: object,
  sharding: Sharding,
  shards: readonly number[],
  worker: number,
): void {
  const { owners } = registry()
  const keys = shards.map((shard) => keyOf(sharding, shard, worker))
  const taken = keys.findIndex((key) => {
    const holder = owners.get(key)
    return holder !== undefined && holder !== owner
  })
  if (taken >= 0) {
    throw new ShardConflictError(
      `Logical shard ${shards[taken]}${sharding.layout.workerBits > 0 ? ` (worker ${worker})` : ''} already has an in-process source in this process. Two generators for one shard would make the same IDs: close the first (source.close()), reuse it, or give each its own shards or worker.`,
    )
  }
  for (const key of keys) owners.set(key, owner)
}

/** Releases `owner`'s claims, remembering the last time each shard issued. */
export function releaseShards(
  owner: object,
  sharding: Sharding,
  lastTimes: ReadonlyMap<number, number>,
  worker: number,
): void {
  const registered = registry()
  for (const [key, holder] of registered.owners) {
    if (holder === owner) registered.owners.delete(key)
  }
  for (const [shard, time] of lastTimes) {
    const key = keyOf(sharding, shard, worker)
    registered.lastTimes.set(key, Math.max(time, registered.lastTimes.get(key) ?? -1))
  }
}

/**
 * The last time (layout units) a closed generator of this process issued for `shard`, or -1: a
 * new generator starts after it, so closing and reopening a source never repeats an ID.
 */
export function lastClaimedTime(sharding: Sharding, shard: number, worker: number): number {
  return registry().lastTimes.get(keyOf(sharding, shard, worker)) ?? -1
}
