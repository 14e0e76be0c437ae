import { setTimeout as sleep } from 'node:timers/promises'
import {
  checkDirectoryEntries,
  type DirectoryEntry,
  type DirectorySnapshot,
  type ShardDirectory,
  type Sharding,
  type ShardMap,
} from '@shardflake/core'

/**
 * The routed suite's shard directory, in the test process's memory: the homes of its map, every
 * shard `serving`, until a case sets a range's state as a move would. Counts its reads, so that a
 * case can wait until the adapter's `ShardHomes` has read a change.
 */
export class SuiteDirectory implements ShardDirectory {
  private version = 1n
  private entries: readonly DirectoryEntry[]
  private reads = 0
  private readonly sharding: Sharding

  constructor(map: ShardMap<string>) {
    this.sharding = map.sharding
    this.entries = checkDirectoryEntries(
      map.sharding,
      map.ranges.map(({ from, to, target }) => ({ from, to, server: target, state: 'serving' })),
    )
  }

  async read(): Promise<DirectorySnapshot> {
    this.reads++
    return {
      version: this.version,
      entries: this.entries,
      maxStaleMs: 5000,
      sharding: this.sharding.toJSON(),
    }
  }

  /** Only the suite's cases change this directory ({@link setState}). */
  async compareAndSet(): Promise<DirectorySnapshot> {
    throw new Error('The routed suite changes its directory itself, with setState().')
  }

  /** Sets the state of the range starting at `from`, then waits until someone has read it. */
  async setState(from: number, state: DirectoryEntry['state']): Promise<void> {
    this.entries = this.entries.map((entry) => (entry.from === from ? { ...entry, state } : entry))
    this.version++
    const before = this.reads
    const deadline = Date.now() + 30_000
    while (this.reads === before) {
      if (Date.now() > deadline) throw new Error('Nothing read the shard directory in 30 s.')
      await sleep(20)
    }
    await sleep(20)
  }

  async close(): Promise<void> {}
}
