import { ConfigurationError } from './errors'
import { readDuration } from './source-options'

/** One logical shard moved from one database to another (the same shape in every dialect). */
export interface MovedShard {
  shard: number
  /**
   * L, where the old home was fenced (ID space): every value the old home ever issued for the
   * shard is at most L, every value the new home issues is above it.
   */
  fencedAt: bigint
  /**
   * How far the new home is ahead of its clock once it continues above L, in ms (0 or less: not
   * ahead). Above `maxDriftMs` the first draws there wait for the clock, at most `maxWaitMs` each.
   */
  aheadMs: number
  /** The old home was fenced already (a move run again after it stopped half-way). */
  resumed: boolean
}

/** Progress of a move, reported after each shard. */
export interface MoveProgress {
  /** Shards moved so far. */
  done: number
  total: number
  /** The shard just moved: the old home refuses it, the new home serves it. */
  shard: number
  /** L: the highest value the old home can ever have issued for the shard. */
  fencedAt: bigint
}

/** What the fence step of a dialect reports: L, and whether the old home was fenced already. */
export interface FencedShard {
  fencedAt: bigint
  resumed: boolean
}

/** The steps a dialect supplies to {@link moveShards}, for one shard at a time. */
export interface MoveSteps<F extends FencedShard> {
  /** Fences the shard on its old home: it can no longer issue values above L. */
  fence(shard: number): Promise<F>
  /** Installs the shard on the new home if needed and continues it above L. */
  arrive(shard: number, fenced: F): Promise<{ aheadMs: number }>
  /**
   * Runs the two steps of one shard (`work`), for what surrounds them: a lock held across both,
   * a failure of the shard turned into a clear error. Without it the steps run as they are.
   */
  around?(shard: number, work: () => Promise<MovedShard>): Promise<MovedShard>
}

/** What {@link moveShards} takes. */
export interface MoveShardsOptions<F extends FencedShard> {
  /** The logical shards to move, ascending, checked already. */
  shards: readonly number[]
  steps: MoveSteps<F>
  /** Called after each shard has arrived (switch that shard in your shard map from here on). */
  onProgress?: ((progress: MoveProgress) => void) | undefined
}

/**
 * Moves logical shards one by one: fences each on its old home, then lets it arrive on the new
 * home above L, and reports it. The dialects (`movePostgresShards`, `moveMysqlShards`) supply the
 * steps; this order, and the one result shape, are shared.
 * @returns the shards moved, in the order given.
 */
export async function moveShards<F extends FencedShard>(
  options: MoveShardsOptions<F>,
): Promise<MovedShard[]> {
  const { shards, steps, onProgress } = options
  const moved: MovedShard[] = []
  for (const shard of shards) {
    const work = async (): Promise<MovedShard> => {
      const fenced = await steps.fence(shard)
      const arrived = await steps.arrive(shard, fenced)
      return {
        shard,
        fencedAt: fenced.fencedAt,
        aheadMs: arrived.aheadMs,
        resumed: fenced.resumed,
      }
    }
    const done = await (steps.around ? steps.around(shard, work) : work())
    moved.push(done)
    onProgress?.({ done: moved.length, total: shards.length, shard, fencedAt: done.fencedAt })
  }
  return moved
}

/**
 * The checks every move makes before it opens anything: `lockTimeoutMs` (default 5000, from 1
 * to 3600000) and two different handles for `from` and `to`.
 * @param place what the two ends are: `'database'` or `'server'`.
 * @returns the lock timeout in ms.
 * @throws InvalidArgumentError for a lock timeout out of bounds.
 * @throws ConfigurationError when `from` and `to` are the same handle.
 */
export function checkMoveEnds(
  options: { from: unknown; to: unknown; lockTimeoutMs?: number | undefined },
  place: string,
): number {
  const lockTimeoutMs = readDuration('lockTimeoutMs', options.lockTimeoutMs, 5000, {
    min: 1,
    max: 3_600_000,
  })
  if (options.from === options.to) {
    throw new ConfigurationError(
      `from and to are the same ${place}: a logical shard moves from one ${place} to another.`,
    )
  }
  return lockTimeoutMs
}
