import {
  checkDirectoryEntries,
  checkExpectedVersion,
  type DirectoryEntry,
  type DirectorySnapshot,
  directoryChanged,
  type ShardDirectory,
  type Sharding,
} from '../src'

/**
 * A shard directory in this process's memory, for the core tests: compare-and-set, and reads that
 * can be made to fail or to answer with what the test says.
 */
export class MemoryDirectory implements ShardDirectory {
  version = 1n
  entries: readonly DirectoryEntry[]
  reads = 0
  /** When set, every read rejects with it. */
  failWith: Error | undefined
  /** When set, reads answer this instead of the stored snapshot. */
  answer: DirectorySnapshot | undefined

  constructor(
    readonly sharding: Sharding,
    entries: readonly DirectoryEntry[],
    readonly maxStaleMs = 5000,
  ) {
    this.entries = checkDirectoryEntries(sharding, entries)
  }

  async read(): Promise<DirectorySnapshot> {
    this.reads++
    await Promise.resolve()
    if (this.failWith) throw this.failWith
    return this.answer ?? this.snapshot()
  }

  async compareAndSet(
    expected: bigint,
    entries: readonly DirectoryEntry[],
  ): Promise<DirectorySnapshot> {
    checkExpectedVersion(expected)
    const checked = checkDirectoryEntries(this.sharding, entries)
    if (expected !== this.version) throw directoryChanged('memory', expected, this.version)
    this.version++
    this.entries = checked
    return this.snapshot()
  }

  /** Sets the state (and server) of the entry starting at `from`, as a move would. */
  async set(from: number, change: Partial<DirectoryEntry>): Promise<void> {
    await this.compareAndSet(
      this.version,
      this.entries.map((entry) => (entry.from === from ? { ...entry, ...change } : entry)),
    )
  }

  async close(): Promise<void> {}

  snapshot(): DirectorySnapshot {
    return {
      version: this.version,
      entries: this.entries,
      maxStaleMs: this.maxStaleMs,
      sharding: this.sharding.toJSON(),
    }
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
