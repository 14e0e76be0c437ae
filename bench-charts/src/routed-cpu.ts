/**
 * What the adapters' database-free router benchmarks share (`bench/routed-cpu.ts`): the router
 * against a database that is not routed, both on a driver or client that sends nothing, so only
 * the client's work is timed. Each round times `n` calls per side as D-R-R-D or R-D-D-R
 * (alternating) after a warm-up; prints the median CPU µs per call of each side and router ÷
 * direct per round: median (smallest..largest round).
 *
 * ```ts
 * await compareCpu({ label: '1-row inserts', router: () => ..., direct: () => ... })
 * ```
 *
 * Environment (read by `cpuSetup`): SIZE rows per insert (1), N calls per slice (20000 for one
 * row, 100 otherwise), ROUNDS (7).
 */
import { defineSharding, InProcessSource, instagram, ShardMap } from '@shardflake/core'
import { median } from './summary.ts'

/**
 * What both sides of a database-free bench share: 64 logical shards on servers a (0-20), b
 * (21-41) and c (42-63), one in-process source, and the sizes the environment asks for.
 */
export function cpuSetup() {
  const size = Number(process.env.SIZE ?? 1)
  const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
  return {
    size,
    n: Number(process.env.N ?? (size === 1 ? 20000 : 100)),
    rounds: Number(process.env.ROUNDS ?? 7),
    sharding,
    source: new InProcessSource({ sharding, shards: 'all' }),
    map: new ShardMap(sharding, [
      { from: 0, to: 20, target: 'a' },
      { from: 21, to: 41, target: 'b' },
      { from: 42, to: 63, target: 'c' },
    ]),
  }
}

export interface CpuComparison {
  /** What the printed line says was timed, e.g. '1-row inserts'. */
  readonly label: string
  readonly router: () => Promise<unknown>
  readonly direct: () => Promise<unknown>
  /** Calls per slice. */
  readonly n: number
  readonly rounds: number
}

/** CPU µs (user + system) per call of `run`, over `times` calls. */
async function cpu(run: () => Promise<unknown>, times: number): Promise<number> {
  const start = process.cpuUsage()
  for (let i = 0; i < times; i++) await run()
  const used = process.cpuUsage(start)
  return (used.user + used.system) / times
}

/** Times both sides in alternating rounds and prints one line; returns the medians. */
export async function compareCpu({ label, router, direct, n, rounds }: CpuComparison) {
  for (let i = 0; i < 2; i++) {
    await cpu(router, n / 4)
    await cpu(direct, n / 4)
  }
  const r: number[] = []
  const d: number[] = []
  const ratios: number[] = []
  for (let round = 0; round < rounds; round++) {
    const [first, second] = round % 2 ? [router, direct] : [direct, router]
    const t = [await cpu(first, n), await cpu(second, n), await cpu(second, n), await cpu(first, n)]
    const [routerUs, directUs] =
      first === router
        ? [(t[0]! + t[3]!) / 2, (t[1]! + t[2]!) / 2]
        : [(t[1]! + t[2]!) / 2, (t[0]! + t[3]!) / 2]
    r.push(routerUs)
    d.push(directUs)
    ratios.push(routerUs / directUs)
  }
  const f = (value: number) => value.toFixed(2)
  const result = { routerUs: median(r), directUs: median(d), ratio: median(ratios) }
  console.log(
    `${label}, ${rounds} rounds of 4 x ${n}: CPU µs per insert, router ${f(result.routerUs)}, direct ${f(result.directUs)}; router ÷ direct ${f(result.ratio)} (${f(Math.min(...ratios))}..${f(Math.max(...ratios))})`,
  )
  return result
}
