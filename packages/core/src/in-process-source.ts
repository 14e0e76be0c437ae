import {
  ClockMovedBackwardsError,
  ConfigurationError,
  InvalidArgumentError,
  InvalidLayoutError,
  ShardOutOfRangeError,
} from './errors'
import { checkCount, resolveLogicalShards, type SyncIdSource } from './id-source'
import type { Layout } from './layout'

/** Which logical shards a process owns: all of them, a list, or an inclusive range. */
export type ShardSelection =
  | 'all'
  | readonly number[]
  | { readonly from: number; readonly to: number }

/** What {@link InProcessSource} takes. */
export interface InProcessSourceOptions {
  /** The layout of the IDs. Decode-only presets are refused. */
  layout: Layout
  /**
   * This process's worker id, for layouts with worker bits: every process generating for the same
   * shards needs its own (validated against the layout, never masked). Required when
   * `layout.workerBits > 0`.
   */
  worker?: number
  /**
   * The logical shards this process generates for, **exclusively**: no other process or database
   * function may make IDs for them. Required when the layout has no worker bits (then this is
   * the only thing that keeps two processes apart); with a worker id it defaults to `'all'`.
   * Give each process its own shards (a lease, a deployment slot, a config value).
   */
  shards?: ShardSelection
  /** How many logical shards keys are reduced by. @default layout.shardCount */
  logicalShards?: number
  /**
   * How far ahead of the clock the time field may run, in ms. Past 2^sequenceBits IDs in one
   * tick the generator **borrows** the next tick instead of wrapping; it waits for the clock once
   * it is this far ahead. The same allowance absorbs small clock steps back.
   * @default 10
   */
  maxDriftMs?: number
  /**
   * The longest the generator blocks waiting for the clock to catch up. A clock that stepped back
   * further than `maxDriftMs + maxWaitMs` makes `nextId` throw `ClockMovedBackwardsError`
   * (nothing is issued) until the clock has caught up.
   * @default 100
   */
  maxWaitMs?: number
  /** The clock, in ms since 1970. Inject one in tests. @default Date.now */
  clock?: () => number
  /** Blocks for `ms` milliseconds. Inject one with an injected clock. @default Atomics.wait */
  sleep?: (ms: number) => void
}

interface ShardState {
  /** Time (in layout units) of the last ID; -1 before the first. */
  time: number
  sequence: number
  /** The ID with this time and sequence 0. */
  base: bigint
}

const waitCell = new Int32Array(new SharedArrayBuffer(4))
const blockingSleep = (ms: number) => {
  Atomics.wait(waitCell, 0, 0, ms)
}

/**
 * Makes IDs in the application process: no round trip, ~1M IDs per second per shard with the
 * Instagram layout, synchronous.
 *
 * **Never the same ID twice in a process**, whatever the rate or the clock:
 * - past 2^sequenceBits IDs in one tick it borrows the next tick (bounded by `maxDriftMs`, then
 *   it waits for the clock), so the sequence never wraps;
 * - when the clock steps back it keeps its own time (the time field never decreases) and, once a
 *   tick's sequence is used up, waits up to `maxWaitMs` for the clock, then throws
 *   `ClockMovedBackwardsError`.
 *
 * **Across processes** it is safe only by configuration: give every process its own `worker` id
 * (layouts with worker bits) or its own set of `shards`. A restarted process must not come back
 * within `maxDriftMs` of its predecessor's last ID, nor after a clock step back larger than that.
 *
 * @example
 * ```ts
 * import { InProcessSource, instagram } from '@shardflake/core'
 *
 * const source = new InProcessSource({ layout: instagram, shards: { from: 0, to: 1999 } })
 * const id = source.nextId(1341)
 * const batch = source.nextIds(1341, 500)
 * ```
 */
export class InProcessSource implements SyncIdSource {
  readonly layout: Layout
  readonly synchronous = true
  readonly logicalShards: number
  readonly worker: number
  private readonly owns: (shard: number) => boolean
  private readonly describeShards: string
  private readonly states: (ShardState | undefined)[] = []
  private readonly clock: () => number
  private readonly sleep: (ms: number) => void
  private readonly maxDriftUnits: number
  private readonly maxWaitMs: number
  private readonly sequences: bigint[]
  private readonly workerPart: bigint

  /**
   * @throws InvalidLayoutError for a decode-only layout.
   * @throws ConfigurationError when neither a worker id nor owned shards are given, or they are
   * invalid.
   */
  constructor(options: InProcessSourceOptions) {
    const { layout } = options
    if (layout.decodeOnly) {
      throw new InvalidLayoutError(
        `Layout ${JSON.stringify(layout.name)} is for decoding other systems' IDs; define your own layout to generate.`,
      )
    }
    if (layout.order.indexOf('sequence') !== 3) {
      throw new InvalidLayoutError('The in-process source needs the sequence as the lowest field.')
    }
    this.layout = layout
    this.worker = readWorker(layout, options.worker)
    const selection = options.shards ?? (layout.workerBits > 0 ? 'all' : undefined)
    if (selection === undefined) {
      throw new ConfigurationError(
        `Layout ${JSON.stringify(layout.name)} has no worker bits, so an in-process source must be told which logical shards this process owns exclusively: pass shards ('all' when this is the only process making IDs).`,
      )
    }
    ;[this.owns, this.describeShards] = readSelection(layout, selection)
    this.logicalShards = resolveLogicalShards(layout, options.logicalShards)
    const maxDriftMs = options.maxDriftMs ?? 10
    const maxWaitMs = options.maxWaitMs ?? 100
    if (!(maxDriftMs >= 0) || !(maxWaitMs >= 0)) {
      throw new ConfigurationError('maxDriftMs and maxWaitMs must be zero or more.')
    }
    this.maxDriftUnits = Math.floor(maxDriftMs / layout.timeUnitMs)
    this.maxWaitMs = maxWaitMs
    this.clock = options.clock ?? Date.now
    this.sleep = options.sleep ?? blockingSleep
    this.sequences = Array.from({ length: layout.maxSequence + 1 }, (_, i) => BigInt(i))
    this.workerPart = BigInt(this.worker) << layout.shifts.worker
  }

  /** One new ID for `shard`. */
  nextId(shard: number): bigint {
    const state = this.state(shard)
    this.advance(state, shard)
    return state.base + this.sequences[state.sequence]!
  }

  /** `count` new ascending IDs for `shard`. */
  nextIds(shard: number, count: number): bigint[] {
    checkCount(count)
    const state = this.state(shard)
    const ids = new Array<bigint>(count)
    for (let i = 0; i < count; i++) {
      this.advance(state, shard)
      ids[i] = state.base + this.sequences[state.sequence]!
    }
    return ids
  }

  private state(shard: number): ShardState {
    const state = this.states[shard]
    if (state) return state
    if (!this.owns(shard)) {
      this.layout.checkShard(shard)
      throw new ShardOutOfRangeError(
        shard,
        `This in-process source does not own logical shard ${String(shard)} (it owns ${this.describeShards}). Another process or database makes IDs for it.`,
      )
    }
    const created: ShardState = { time: -1, sequence: 0, base: 0n }
    this.states[shard] = created
    return created
  }

  /** Moves `state` to the next unused (time, sequence) pair. */
  private advance(state: ShardState, shard: number): void {
    const now = this.now()
    if (now > state.time) {
      this.moveTo(state, shard, now)
    } else if (state.sequence < this.layout.maxSequence) {
      state.sequence++
    } else {
      // The tick is used up (a burst, or a clock that went back): borrow the next tick.
      const next = state.time + 1
      this.waitUntil(next - this.maxDriftUnits, now, state.time)
      this.moveTo(state, shard, next)
    }
  }

  private moveTo(state: ShardState, shard: number, time: number): void {
    const { layout } = this
    layout.checkTime(time)
    state.time = time
    state.sequence = 0
    state.base =
      (BigInt(time) << layout.shifts.time) |
      (BigInt(shard) << layout.shifts.shard) |
      this.workerPart
    if (state.base >= 1n << 63n) state.base -= 1n << 64n
  }

  /** Blocks until the clock reaches `target` (in time units), at most `maxWaitMs`. */
  private waitUntil(target: number, now: number, lastTime: number): void {
    if (now >= target) return
    const unit = this.layout.timeUnitMs
    const behindMs = (lastTime - now) * unit
    if ((target - now) * unit > this.maxWaitMs)
      throw new ClockMovedBackwardsError(behindMs, this.maxWaitMs)
    let current = now
    let waited = 0
    while (current < target) {
      const ms = (target - current) * unit
      if (waited + ms > this.maxWaitMs) throw new ClockMovedBackwardsError(behindMs, this.maxWaitMs)
      this.sleep(ms)
      waited += ms
      current = this.now()
    }
  }

  private now(): number {
    const ms = this.clock()
    if (!Number.isFinite(ms)) {
      throw new ConfigurationError(
        `The clock of this InProcessSource returned ${String(ms)}, not a number of ms since 1970: no ID was issued.`,
      )
    }
    const time = Math.floor((ms - this.layout.epoch) / this.layout.timeUnitMs)
    return time >= 0 ? time : this.layout.timeAt(ms)
  }
}

function readWorker(layout: Layout, worker: number | undefined): number {
  if (layout.workerBits === 0) {
    if (worker !== undefined && worker !== 0) {
      throw new ConfigurationError(
        `Layout ${JSON.stringify(layout.name)} has no worker bits, so worker ${worker} cannot be encoded. Add workerBits to the layout, or give each process its own shards instead.`,
      )
    }
    return 0
  }
  if (worker === undefined) {
    throw new ConfigurationError(
      `Layout ${JSON.stringify(layout.name)} has ${layout.workerBits} worker bits: pass this process's worker id (0 to ${layout.workerCount - 1}), unique among the processes generating IDs.`,
    )
  }
  if (!Number.isInteger(worker) || worker < 0 || worker >= layout.workerCount) {
    throw new ConfigurationError(
      `Worker ${worker} does not fit the ${layout.workerBits} worker bits of layout ${JSON.stringify(layout.name)} (0 to ${layout.workerCount - 1}).`,
    )
  }
  return worker
}

function readSelection(
  layout: Layout,
  selection: ShardSelection,
): [(shard: number) => boolean, string] {
  if (selection === 'all') {
    return [
      (shard) => Number.isInteger(shard) && shard >= 0 && shard < layout.shardCount,
      'all shards',
    ]
  }
  if (Array.isArray(selection)) {
    const list = selection as readonly number[]
    if (list.length === 0) throw new ConfigurationError('shards must not be an empty list.')
    for (const shard of list) layout.checkShard(shard)
    const set = new Set(list)
    return [
      (shard) => set.has(shard),
      `shards ${[...set].slice(0, 10).join(', ')}${set.size > 10 ? ', ...' : ''}`,
    ]
  }
  const { from, to } = selection as { from: number; to: number }
  layout.checkShard(from)
  layout.checkShard(to)
  if (to < from) throw new InvalidArgumentError(`Shard range ${from}-${to} ends before it starts.`)
  return [
    (shard) => Number.isInteger(shard) && shard >= from && shard <= to,
    `shards ${from}-${to}`,
  ]
}
