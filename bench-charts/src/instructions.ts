/**
 * A routed-write benchmark's rounds counted in instructions instead of CPU time: runs the bench
 * under Valgrind's callgrind (Debian's `valgrind`), which counts every instruction the process
 * executes, whatever else the machine is doing, and splits the count at each timed slice (a
 * profile dumped before each `process.cpuUsage()` call, which only the harness's slices make).
 * Prints, per shape, the main thread's instructions per write of each side and router ÷ direct per
 * round: median (smallest..largest round).
 *
 *   node bench-charts/src/instructions.ts [--json] -- node bench/routed.ts
 *
 * The main thread only: V8 compiles optimized code and marks the heap on threads of their own,
 * in bursts that fall into whichever slice is running, and the same bench counted twice puts them
 * in different slices. The main thread's counts repeat to within a fraction of a percent once the
 * code is optimized. They leave out what the kernel does (the sockets' system calls, the same on
 * both sides) and what memory costs beyond an instruction (cache misses, which CPU time includes).
 *
 * Under callgrind a write takes a few hundred times as long: keep the slices short, and the
 * warm-up long enough for V8 to optimize the router's own functions, which run once a write:
 * SHAPES=1 SINGLE_TIMES=150 ROUNDS=5 (the harness warms each side up with 4000 single-row writes,
 * past the 3000 calls after which V8 optimizes a function). For 1000 rows, SHAPES=1000
 * BATCH_TIMES=4 WARMUP=5 WARMUP_WRITES=0 ROUNDS=3: the code run per row is optimized within the
 * first writes, and the router's per-write code weighs a thousandth of a write. See `routed.ts`
 * for the harness's environment.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Slice } from './routed.ts'
import { median } from './summary.ts'

export interface InstructionCounts {
  rounds: number
  writesPerSlice: number
  /** Main-thread instructions per write, median of the rounds. */
  perWrite: { router: number; direct: number }
  /** Router ÷ direct main-thread instructions, per round. */
  ratio: { median: number; min: number; max: number }
  perRound: { router: number[]; direct: number[] }
}

/**
 * The main thread's instructions in each dump of a callgrind run, by dump number: callgrind
 * (with `--separate-threads=yes`) names them `<out>.<dump>-01` (the first dump `<out>-01`).
 */
export async function mainThreadDumps(dir: string, base: string): Promise<Map<number, number>> {
  const dumps = new Map<number, number>()
  for (const name of await readdir(dir)) {
    const match = new RegExp(`^${base}(?:\\.(\\d+))?-01$`).exec(name)
    if (!match) continue
    const text = await readFile(join(dir, name), 'utf8')
    const summary = /^summary: (\d+)$/m.exec(text)
    if (!summary) throw new Error(`${name}: no summary line; is it a callgrind profile?`)
    dumps.set(Number(match[1] ?? 0), Number(summary[1]))
  }
  return dumps
}

/**
 * Each timed round's instructions per write, by shape. Dumps come before each slice's first and
 * last `process.cpuUsage()` call: slice `k` (in run order) is dump `2k + 2`, what ran between
 * its two calls.
 */
export function countsOf(
  slices: readonly Slice[],
  dumps: ReadonlyMap<number, number>,
): Record<string, InstructionCounts> {
  const byShape = new Map<string, Map<number, { router: number; direct: number; slices: number }>>()
  const writesOf = new Map<string, number>()
  slices.forEach((slice, k) => {
    if (slice.round < 0) return // warm-up
    writesOf.set(slice.shape, slice.writes)
    const count = dumps.get(2 * k + 2)
    if (count === undefined) throw new Error(`No profile dumped for slice ${k}.`)
    const rounds = byShape.get(slice.shape) ?? new Map()
    byShape.set(slice.shape, rounds)
    const round = rounds.get(slice.round) ?? { router: 0, direct: 0, slices: 0 }
    rounds.set(slice.round, round)
    if (++round.slices > 4) {
      throw new Error(
        `Round ${slice.round} of ${slice.shape} ran more than four slices: count one bench (one dialect: DIALECTS=postgres) per run.`,
      )
    }
    round[slice.side as 'router' | 'direct'] += count
  })
  const out: Record<string, InstructionCounts> = {}
  for (const [shape, rounds] of byShape) {
    const writes = 2 * writesOf.get(shape)! // each side runs two slices a round
    const router = [...rounds.values()].map((round) => round.router / writes)
    const direct = [...rounds.values()].map((round) => round.direct / writes)
    const ratios = router.map((value, i) => value / direct[i]!)
    out[shape] = {
      rounds: rounds.size,
      writesPerSlice: writes / 2,
      perWrite: { router: median(router), direct: median(direct) },
      ratio: { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) },
      perRound: { router, direct },
    }
  }
  return out
}

async function main() {
  const argv = process.argv.slice(2)
  const dash = argv.indexOf('--')
  const command = dash >= 0 ? argv.slice(dash + 1) : []
  if (command.length === 0) {
    throw new Error('Usage: node bench-charts/src/instructions.ts [--json] -- node bench/routed.ts')
  }
  const json = argv.slice(0, Math.max(dash, 0)).includes('--json')
  const dir = await mkdtemp(join(tmpdir(), 'shardflake-instructions-'))
  try {
    const slicesFile = join(dir, 'slices.json')
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(
        'valgrind',
        [
          '--tool=callgrind',
          // V8 writes and moves the code it compiles: every write to it must drop stale translations.
          '--smc-check=all-non-file',
          '--separate-threads=yes',
          '--dump-before=node::CPUUsage*',
          `--callgrind-out-file=${join(dir, 'cg')}`,
          '--log-file=/dev/null',
          ...command,
        ],
        {
          stdio: ['ignore', json ? 'ignore' : 'inherit', 'inherit'],
          env: { ...process.env, SLICES: slicesFile },
        },
      )
      child.on('error', reject)
      child.on('exit', resolve)
    })
    if (code !== 0) throw new Error(`The bench exited with ${code} under callgrind.`)
    const slices: Slice[] = JSON.parse(await readFile(slicesFile, 'utf8'))
    const counts = countsOf(slices, await mainThreadDumps(dir, 'cg'))
    if (json) {
      console.log(JSON.stringify(counts, null, 2))
      return
    }
    for (const [shape, result] of Object.entries(counts)) {
      const { ratio, perWrite } = result
      console.log(
        `${shape}: router / direct main-thread instructions ${ratio.median.toFixed(4)} (${ratio.min.toFixed(4)}..${ratio.max.toFixed(4)}) over ${result.rounds} rounds; per write: router ${Math.round(perWrite.router)}, direct ${Math.round(perWrite.direct)}`,
      )
    }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
