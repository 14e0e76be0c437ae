import { formatShardList, type MovedShard, type ShardingDescription } from '@shardflake/core'
import type { CliIo } from './cli-io'
import { progressBar, runGuarded, wholeNumberFlag } from './install-options'

/** What a dialect's move returns, as far as the report needs it. */
export interface MoveOutcome {
  readonly sharding: ShardingDescription
  readonly shards: readonly MovedShard[]
}

/** The dialect's part of `shardflake move <dialect>`. */
export interface DialectMove<R extends MoveOutcome> {
  /** Where a shard lives, for the report: `'server'` or `'database'`. */
  readonly place: string
  /** The old and the new home's connections, created but not yet connected; ended at the end. */
  readonly connections: readonly { end(): Promise<unknown> }[]
  /** Runs the dialect's move (connecting first where its driver needs it). */
  move(extra: { lockTimeoutMs?: number; onProgress: ReturnType<typeof progressBar> }): Promise<R>
  /** Where the moved shards live, e.g. `databases shard_2..shard_3`; `names(prefix)` gives the range. */
  where(result: R, names: (prefix: string) => string): string
}

/**
 * Runs `shardflake move <dialect>`: reads `--lock-timeout-ms`, runs the dialect's move with a
 * progress bar, prints what it did, and ends the connections whatever happens (a driver's error
 * becomes `SourceUnavailableError` "Could not move: ...").
 */
export async function runMove<R extends MoveOutcome>(
  io: CliIo,
  lockTimeoutFlag: string | undefined,
  open: () => Promise<DialectMove<R>>,
): Promise<void> {
  const lockTimeoutMs = wholeNumberFlag('--lock-timeout-ms', lockTimeoutFlag)
  const dialect = await open()
  await runGuarded(
    'Could not move',
    async () => {
      const result = await dialect.move({
        ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
        onProgress: progressBar(io),
      })
      const shards = result.shards.map((moved) => moved.shard)
      const names = (prefix: string) => `${prefix}${shards[0]}..${prefix}${shards.at(-1)}`
      reportMove(io, result.sharding.layout.name, result.shards, {
        place: dialect.place,
        where: dialect.where(result, names),
      })
    },
    () => Promise.all(dialect.connections.map((connection) => connection.end())),
  )
}

/** How a dialect names what the move report speaks of. */
export interface MoveWords {
  /** Where a shard lives: `'server'` or `'database'`. */
  place: string
  /** Where the moved shards live, e.g. `databases shard_0..shard_9`. */
  where: string
}

/** Prints what a move did: the shards moved, what to switch, and new homes ahead of their clock. */
function reportMove(
  io: CliIo,
  layoutName: string,
  moved: readonly MovedShard[],
  words: MoveWords,
): void {
  const shards = moved.map((m) => m.shard)
  const resumed = moved.filter((m) => m.resumed).length
  const { place } = words
  io.stdout(
    `moved ${shards.length} shard(s) of layout ${JSON.stringify(layoutName)} (${words.where})${resumed > 0 ? `, ${resumed} of them resumed` : ''}: the old ${place} refuses them (SQLSTATE SF005), the new one continues above every ID the old one issued.`,
  )
  io.stdout(
    `now point logical shard(s) ${formatShardList(shards)} at the new ${place} in your shard map.`,
  )
  const ahead = moved.filter((m) => m.aheadMs > 1000)
  if (ahead.length > 0) {
    const most = Math.max(...ahead.map((m) => m.aheadMs))
    io.stderr(
      `warning: the new counter of shard(s) ${formatShardList(ahead.map((m) => m.shard))} is up to ${Math.round(most)} ms ahead of the new ${place}'s clock (a burst on the old one, or its clock ahead): draws there wait for the clock, and fail while it is further ahead than they may wait.`,
    )
  }
}
