/**
 * The order in which a benchmark runs its modes for one step: a shuffle drawn from `seed`, the same
 * in every run, so that each mode follows every other about equally often. A fixed cycle would
 * always put the same mode right after the switch from one database's connections to another's.
 */

/**
 * `items` shuffled (Fisher-Yates) by a mulberry32 generator seeded with `seed`; `items` is left as
 * it is.
 * @param seed any number; read as an unsigned 32-bit integer.
 * @example
 * ```ts
 * import { shuffled } from '@shardflake/bench-charts/shuffle'
 *
 * for (let step = 1; step <= 100; step++) {
 *   for (const mode of shuffled(['identity', 'in-process', 'database'], step)) {
 *     // one insert of `mode`
 *   }
 * }
 * ```
 */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const order = [...items]
  let state = seed >>> 0
  for (let i = order.length - 1; i > 0; i--) {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    const j = Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * (i + 1))
    ;[order[i], order[j]] = [order[j]!, order[i]!]
  }
  return order
}
