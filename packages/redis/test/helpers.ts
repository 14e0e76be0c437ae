import { defineSharding, instagram, type Layout } from '@shardflake/core'

/** The sharding most tests use. */
export const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })

/** An injectable clock and a sleep that advances it (the script then uses this time, not TIME). */
export function fakeClock(start: number) {
  const clock = {
    now: start,
    slept: 0,
    read: () => clock.now,
    sleep: async (ms: number) => {
      clock.slept += ms
      clock.now += ms
    },
  }
  return clock
}

/** How many IDs share each (time) value, for IDs of one shard. */
export function perTick(layout: Layout, ids: readonly bigint[]): Map<number, number> {
  const counts = new Map<number, number>()
  for (const id of ids) {
    const { time } = layout.decompose(id)
    counts.set(time, (counts.get(time) ?? 0) + 1)
  }
  return counts
}

export function isAscending(ids: readonly bigint[]): boolean {
  for (let i = 1; i < ids.length; i++) if (ids[i]! <= ids[i - 1]!) return false
  return true
}
