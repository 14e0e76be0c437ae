import { formatShardList, type MovedShard } from '@shardflake/core'
import type { CliIo } from './cli-io'

/** How a dialect names what the move report speaks of. */
export interface MoveWords {
  /** `'server'` or `'database'`. */
  place: string
  /** What holds the shard's position: `'counter'` or `'sequence'`. */
  counter: string
  /** Where the shards live, e.g. `databases shard_0..shard_9`. */
  where: string
  /** What the new home continues above. */
  above: string
  /** How a draw fails while the new home is too far ahead, e.g. `' with SF001'`, or `''`. */
  failsWith: string
}

/** Prints what a move did: the shards moved, what to switch, and new homes ahead of their clock. */
export function reportMove(
  io: CliIo,
  layoutName: string,
  moved: readonly MovedShard[],
  words: MoveWords,
): void {
  const shards = moved.map((m) => m.shard)
  const resumed = moved.filter((m) => m.resumed).length
  const { place } = words
  io.stdout(
    `moved ${shards.length} shard(s) of layout ${JSON.stringify(layoutName)} (${words.where})${resumed > 0 ? `, ${resumed} of them resumed` : ''}: the old ${place} refuses them (SQLSTATE SF005), the new one continues above ${words.above}.`,
  )
  io.stdout(
    `now point logical shard(s) ${formatShardList(shards)} at the new ${place} in your shard map.`,
  )
  const ahead = moved.filter((m) => m.aheadMs > 1000)
  if (ahead.length > 0) {
    const most = Math.max(...ahead.map((m) => m.aheadMs))
    io.stderr(
      `warning: the new ${words.counter} of shard(s) ${formatShardList(ahead.map((m) => m.shard))} is up to ${Math.round(most)} ms ahead of the new ${place}'s clock (a burst on the old one, or its clock ahead): draws there wait for the clock, and fail${words.failsWith} while it is further ahead than they may wait.`,
    )
  }
}
