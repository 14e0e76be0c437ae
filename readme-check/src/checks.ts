/**
 * What the checks assert, in words a failure message can carry. The expected shard of a key is
 * computed here (conformance's `expectedShard`: `key mod n` for integers and digit strings,
 * 32-bit FNV-1a of the UTF-8 bytes for other strings), not by the package under test; an ID's
 * shard is read from its bits with the layout.
 */
import { expectedShard } from '@shardflake/conformance'
import { instagram, type Layout } from '@shardflake/core'

/** The logical shard inside an ID of `layout` (bits above the worker and sequence fields). */
export function shardOfId(id: unknown, layout: Layout = instagram): number {
  return layout.shardOf(BigInt(String(id)))
}

/** The shard a plain key goes to with `logicalShards`. */
export function shardOfKey(key: string | bigint | number, logicalShards: number): number {
  return expectedShard(String(key), logicalShards)
}

/** Throws with `message` unless `condition` holds. */
export function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message)
}

/** Throws unless there are exactly `count` rows, naming `what`. */
export function ensureCount(rows: readonly unknown[], count: number, what: string): void {
  ensure(rows.length === count, `expected ${count} ${what}, found ${rows.length}`)
}

/**
 * Throws unless every row's `id` decodes to the shard `expected(row)` gives; the message names
 * the first misplaced row.
 */
export function ensurePlaced(
  rows: readonly Record<string, unknown>[],
  expected: (row: Record<string, unknown>) => number,
  what: string,
  layout: Layout = instagram,
): void {
  for (const row of rows) {
    const actual = shardOfId(row.id, layout)
    const wanted = expected(row)
    ensure(
      actual === wanted,
      `${what} ${String(row.id)} is on shard ${actual}, but belongs on shard ${wanted} (${JSON.stringify(row)})`,
    )
  }
}
