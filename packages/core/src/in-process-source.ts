import {
  ClockMovedBackwardsError,
  ConfigurationError,
  InvalidArgumentError,
  InvalidLayoutError,
  ShardOutOfRangeError,
  ShardOverloadedError,
} from './errors'
import { checkContext, checkCount, type IdRequestContext, type SyncIdSource } from './id-source'
import { checkKnownOptions, describeValue } from './known-options'
import type { Layout } from './layout'
import { claimShards, lastClaimedTime, releaseShards } from './shard-claims'
import { checkListSize } from './shard-map'
import { requireSharding, type Sharding } from './sharding'
import { readDuration, readSourceDuration } from './source-options'

/** Which logical shards a process owns: all of them, a list, or an inclusive range. */
export type ShardSelection =
  | 'all'
  | readonly number[]
  | { readonly from: number; readonly to: number }

/** What {@link InProcessSource} takes. */
export interface InProcessSourceOptions {
  /** The application's sharding ({@link defineSharding}). Decode-only layouts are refused. */
  sharding: Sharding
  /**
   * This process's worker id, for layouts with worker bits: every process generating for the same
   * shards needs its own (validated against the layout, never masked). Required when
   * `layout.workerBits > 0`.
   */
  worker?: number
  /**
   * The logical shards this process generates for, **exclusively**: no other process or database
   * function may make IDs for them. Required when the layout has no worker bits (then this is
   * the only thing that keeps two processes apart); with a worker id it defaults to `'all'`
   * (every logical shard). Give each process its own shards (a deployment slot, a config value).
   * A second in-process source for one of these shards in the same process is refused
   * (`ShardConflictError`) until this one is closed.
   */
  shards?: ShardSelection
  /**
   * How far ahead of the clock the time field may run, in ms. Past 2^sequenceBits IDs in one
   * tick the generator **borrows** the next tick instead of wrapping; it waits for the clock once
   * it is this far ahead. Smaller than the database sources' allowance (1000 ms) on purpose: the
   * counter lives in memory, and a restarted process must not come back within this allowance of
   * its predecessor's last ID.
   * @default 10
   */
  maxDriftMs?: number
  /**
   * The longest the generator blocks waiting for the clock to catch up, in ms. After that it
   * throws: `ClockMovedBackwardsError` when the clock went back, `ShardOverloadedError` when a
   * burst asked for more IDs than the shard makes within `maxDriftMs`. Nothing is issued.
   * @default 100
   */
  maxWaitMs?: number
  /**
   * No ID carries a time at or before this instant (ms since 1970): the high-water mark a
   * previous holder of this worker recorded. The first ID waits for the clock to pass it (up to
   * `maxWaitMs` beyond the drift allowance). A lease sets it; you rarely need to.
   */
  startAfterMs?: number
  /**
   * Called with each new time (layout units) before IDs with it are issued; throwing stops the
   * source from issuing them. Leases use it to stop at their high-water mark.
   */
  guard?: (time: number) => void
  /** The clock, in ms since 1970. Inject one in tests. @default Date.now */
  clock?: () => number
  /** Blocks for `ms` milliseconds. Inject one with an injected clock. @default Atomics.wait */
  sleep?: (ms: number) => void
}

interface ShardState {
  shard: number
  /** Time (in layout units) of the last ID; -1 before the first. */
  time: number
  sequence: number
  /** The ID with this time and sequence 0. */
  base: bigint
  /** The highest clock reading seen (layout units): a lower one means the clock went back. */
  seen: number
}

const IN_PROCESS_OPTIONS = [
  'sharding',
  'worker',
  'shards',
  'maxDriftMs',
  'maxWaitMs',
  'startAfterMs',
  'guard',
  'clock',
  'sleep',
]

/** Sequence values up to this many are converted to bigints once, in the constructor. */
const SEQUENCE_TABLE = 65_536

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
 * **In one process** a second source for the same shard is refused (`ShardConflictError`), and a
 * source opened after another was closed starts after the closed one's last ID.
 *
 * **Across processes** it is safe only by configuration: give every process its own `worker` id
 * (layouts with worker bits) or its own set of `shards`. A restarted process must not come back
 * within `maxDriftMs` of its predecessor's last ID, nor after a clock step back larger than that.
 *
 * @example
 * ```ts
 * import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const source = new InProcessSource({ sharding, shards: { from: 0, to: 999 } })
 * const id = source.nextId(sharding.shardForKey(31341n))
 * const batch = source.nextIds(42, 500)
 * source.close()
 * ```
 */
export class InProcessSource implements SyncIdSource {
  readonly sharding: Sharding
  readonly synchronous = true
  readonly worker: number
  private readonly layout: Layout
  private readonly owns: (shard: number) => boolean
  private readonly describeShards: string
  private readonly states: (ShardState | undefined)[] = []
  private closed = false
  private readonly floor: number
  private readonly guard: ((time: number) => void) | undefined
  private readonly clock: () => number
  private readonly sleep: (ms: number) => void
  private readonly maxDriftUnits: number
  private readonly maxWaitMs: number
  private readonly sequences: bigint[]
  private readonly workerPart: bigint
  /** The first clock reading (layout units): no ascending batch reaches back before it. */
  private firstSeen = Number.NaN

  /**
   * @throws InvalidLayoutError for a decode-only layout.
   * @throws TimeExhaustedError when the layout's time field is used up.
   * @throws ConfigurationError when `sharding` is missing, or neither a worker id nor owned
   * shards are given, or they are invalid.
   * @throws ShardConflictError when another open in-process source of this process has one of
   * the shards.
   */
  constructor(options: InProcessSourceOptions) {
    checkKnownOptions('InProcessSource options', options, IN_PROCESS_OPTIONS)
    const sharding = requireSharding(options.sharding, 'InProcessSource')
    const { layout } = sharding
    layout.checkGenerating()
    if (layout.order.indexOf('sequence') !== 3) {
      throw new InvalidLayoutError('The in-process source needs the sequence as the lowest field.')
    }
    this.sharding = sharding
    this.layout = layout
    this.worker = readWorker(layout, options.worker)
    const selection = options.shards ?? (layout.workerBits > 0 ? 'all' : undefined)
    if (selection === undefined) {
      throw new ConfigurationError(
        `Layout ${JSON.stringify(layout.name)} has no worker bits, so an in-process source must be told which logical shards this process owns exclusively: pass shards ('all' when this is the only process making IDs).`,
      )
    }
    const startAfterMs: unknown = options.startAfterMs
    if (
      startAfterMs !== undefined &&
      (typeof startAfterMs !== 'number' || !Number.isFinite(startAfterMs))
    ) {
      throw new InvalidArgumentError(
        `startAfterMs must be a finite number of ms since 1970, got ${describeValue(startAfterMs)}.`,
      )
    }
    for (const hook of ['guard', 'clock', 'sleep'] as const) {
      if (options[hook] !== undefined && typeof options[hook] !== 'function') {
        throw new InvalidArgumentError(
          `InProcessSource option ${hook} must be a function, got ${describeValue(options[hook])}.`,
        )
      }
    }
    const maxDriftMs = readDuration('maxDriftMs', options.maxDriftMs, 10)
    const maxWaitMs = readSourceDuration('maxWaitMs', options.maxWaitMs, {
      max: 60_000,
    })
    let shards: number[]
    ;[this.owns, this.describeShards, shards] = readSelection(sharding, selection)
    claimShards(this, sharding, shards, this.worker)
    this.maxDriftUnits = Math.floor(maxDriftMs / layout.timeUnitMs)
    this.floor = options.startAfterMs === undefined ? -1 : layout.timeAt(options.startAfterMs, true)
    this.guard = options.guard
    this.maxWaitMs = maxWaitMs
    this.clock = options.clock ?? Date.now
    this.sleep = options.sleep ?? blockingSleep
    // Sequence values as bigints, made once: a bigint per ID costs time. A wide sequence field
    // (up to 31 bits) would make this table too large; then each value is converted as issued.
    this.sequences = Array.from(
      { length: Math.min(layout.maxSequence + 1, SEQUENCE_TABLE) },
      (_, i) => BigInt(i),
    )
    this.workerPart = BigInt(this.worker) << layout.shifts.worker
  }

  /**
   * Releases this source's shards, so another in-process source of this process may take them
   * (it starts after this one's last ID). Further calls throw.
   */
  close(): void {
    if (this.closed) return
    this.closed = true
    const lastTimes = new Map<number, number>()
    this.states.forEach((state, shard) => {
      if (state && state.time >= 0) lastTimes.set(shard, state.time)
    })
    releaseShards(this, this.sharding, lastTimes, this.worker)
  }

  /** The highest time (ms since 1970) any ID of this source carries; -Infinity before the first. */
  lastIssuedMs(): number {
    let last = -1
    for (const state of this.states) if (state && state.time > last) last = state.time
    return last < 0 ? Number.NEGATIVE_INFINITY : this.layout.epoch + last * this.layout.timeUnitMs
  }

  /** One new ID for `shard`. */
  nextId(shard: number, context?: IdRequestContext): bigint {
    if (context !== undefined) checkContext(context, 'InProcessSource.nextId')
    const state = this.state(shard)
    this.advance(state, shard)
    return state.base + (this.sequences[state.sequence] ?? BigInt(state.sequence))
  }

  /** `count` new ascending IDs for `shard`. */
  nextIds(shard: number, count: number, context?: IdRequestContext): bigint[] {
    checkCount(count)
    if (context !== undefined) checkContext(context, 'InProcessSource.nextIds')
    const state = this.state(shard)
    const ids = new Array<bigint>(count)
    for (let i = 0; i < count; i++) {
      this.advance(state, shard)
      ids[i] = state.base + (this.sequences[state.sequence] ?? BigInt(state.sequence))
    }
    return ids
  }

  /**
   * One ID for each entry of `shards` (the shard of each row), **ascending in the order given**
   * (within each group when `groups` is given), so that a multi-row INSERT appends to the end of
   * a B-tree instead of splitting its pages. Use {@link allocateAscending}, which falls back to
   * {@link nextIds} per shard when this returns `undefined`.
   *
   * A row whose shard is below the previous row's needs the next time unit, so a batch spans
   * about one unit per such step (about half the rows for shards in random order). The batch
   * ends at the clock when it can, taking the units the source left unused behind it (back to
   * `maxLagMs` before now, never before this source's first clock reading), and never runs ahead
   * of the clock by more than `maxDriftMs`. When that window is too narrow it returns `undefined`
   * and issues nothing.
   * IDs stay distinct and ascending per shard, as with {@link nextId}.
   *
   * @param shards The logical shard of each row, in row order.
   * @param maxLagMs How far behind the clock the batch's first ID may be. @default 1000
   * @param groups A group of each row (its table, say): IDs ascend within each group.
   * @throws ShardOutOfRangeError for a shard this source does not own.
   * @throws LeaseExpiredError from a leased source whose lease was not renewed.
   * @example
   * ```ts
   * import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
   *
   * const sharding = defineSharding({ layout: instagram, logicalShards: 16 })
   * const source = new InProcessSource({ sharding, shards: 'all' })
   * const ids = source.nextIdsAscending([9, 3, 12], 1000) // ids[0] < ids[1] < ids[2], or undefined
   * ```
   */
  nextIdsAscending(
    shards: readonly number[],
    maxLagMs = 1000,
    groups?: readonly unknown[],
  ): bigint[] | undefined {
    const count = shards.length
    if (count === 0) return []
    checkCount(count)
    if (groups !== undefined && groups.length !== count) {
      throw new InvalidArgumentError(
        `groups must name a group for each of the ${count} rows, got ${groups.length}.`,
      )
    }
    const lag = readDuration('maxLagMs', maxLagMs, 1000)
    const max = this.layout.maxSequence
    const now = this.now()
    const lowest = Math.max(now - Math.floor(lag / this.layout.timeUnitMs), this.firstSeen)
    const limit = now + this.maxDriftUnits
    const times = new Array<number>(count)
    const sequences = new Array<number>(count)
    // The last (time, sequence) planned for each shard, and the previous row of each group.
    const last = new Map<number, [ShardState, number, number]>()
    const previous = new Map<unknown, number>()
    for (let i = 0; i < count; i++) {
      const shard = shards[i]!
      let entry = last.get(shard)
      if (!entry) {
        const state = this.state(shard)
        entry = [state, state.time, state.sequence]
        last.set(shard, entry)
      }
      // Above this shard's last ID.
      let time = entry[2] < max ? entry[1] : entry[1] + 1
      let sequence = entry[2] < max ? entry[2] + 1 : 0
      if (lowest > time) {
        time = lowest
        sequence = 0
      }
      // Above the previous row of the group: the same unit for a higher shard, the next for a lower.
      const p = previous.get(groups?.[i])
      if (p !== undefined) {
        const prevShard = shards[p]!
        let t = times[p]!
        let q = 0
        if (shard === prevShard) {
          if (sequences[p]! < max) q = sequences[p]! + 1
          else t++
        } else if (shard < prevShard) t++
        if (t > time || (t === time && q > sequence)) {
          time = t
          sequence = q
        }
      }
      if (time > limit) return undefined
      times[i] = time
      sequences[i] = sequence
      entry[1] = time
      entry[2] = sequence
      previous.set(groups?.[i], i)
    }
    let top = lowest
    for (const [, time] of last.values()) if (time > top) top = time
    // Planned from as far back as allowed; moved up so that the batch ends now (a moved plan stays
    // above every constraint): its IDs carry times no older than the batch needs.
    if (top < now) {
      const shift = now - top
      for (let i = 0; i < count; i++) times[i] = times[i]! + shift
      for (const entry of last.values()) entry[1] += shift
      top = now
    }
    this.layout.checkTime(top)
    this.guard?.(top)
    // Commit: each shard's state moves to its last planned ID (never backwards).
    for (const [shard, [state, time, sequence]] of last) {
      if (now > state.seen) state.seen = now
      if (time > state.time || (time === state.time && sequence > state.sequence)) {
        if (time !== state.time) this.moveTo(state, shard, time, false)
        state.sequence = sequence
      }
    }
    const { shifts } = this.layout
    const ids = new Array<bigint>(count)
    for (let i = 0; i < count; i++) {
      let id =
        (BigInt(times[i]!) << shifts.time) |
        (BigInt(shards[i]!) << shifts.shard) |
        this.workerPart |
        (this.sequences[sequences[i]!] ?? BigInt(sequences[i]!))
      if (id >= 1n << 63n) id -= 1n << 64n
      ids[i] = id
    }
    return ids
  }

  private state(shard: number): ShardState {
    // A shard that is not a number is refused below; as an index it could throw untyped.
    const state = typeof shard === 'number' ? this.states[shard] : undefined
    if (state && !this.closed) return state
    if (this.closed) {
      throw new ConfigurationError('This InProcessSource was closed; create a new one.')
    }
    if (!this.owns(shard)) {
      this.sharding.checkShard(shard)
      throw new ShardOutOfRangeError(
        shard,
        `This in-process source does not own logical shard ${String(shard)} (it owns ${this.describeShards}). Another process or database makes IDs for it.`,
      )
    }
    const last = Math.max(lastClaimedTime(this.sharding, shard, this.worker), this.floor)
    const created: ShardState = {
      shard,
      time: last,
      sequence: this.layout.maxSequence,
      base: 0n,
      seen: last,
    }
    this.states[shard] = created
    return created
  }

  /** Moves `state` to the next unused (time, sequence) pair. */
  private advance(state: ShardState, shard: number): void {
    const now = this.now()
    if (now > state.seen) state.seen = now
    if (now > state.time) {
      this.moveTo(state, shard, now)
    } else if (state.sequence < this.layout.maxSequence) {
      state.sequence++
    } else {
      // The tick is used up (a burst, or a clock that went back): borrow the next tick.
      const next = state.time + 1
      this.waitUntil(next - this.maxDriftUnits, now, state)
      this.moveTo(state, shard, next)
    }
  }

  private moveTo(state: ShardState, shard: number, time: number, check = true): void {
    const { layout } = this
    if (check) {
      layout.checkTime(time)
      this.guard?.(time)
    }
    state.time = time
    state.sequence = 0
    state.base =
      (BigInt(time) << layout.shifts.time) |
      (BigInt(shard) << layout.shifts.shard) |
      this.workerPart
    if (state.base >= 1n << 63n) state.base -= 1n << 64n
  }

  /** Blocks until the clock reaches `target` (in time units), at most `maxWaitMs`. */
  private waitUntil(target: number, now: number, state: ShardState): void {
    if (now >= target) return
    const unit = this.layout.timeUnitMs
    const fail = () => {
      // A clock reading below one already seen means the clock stepped back; otherwise the
      // time field ran ahead because more IDs were asked than the shard makes in maxDriftMs.
      if (now < state.seen)
        return new ClockMovedBackwardsError((state.seen - now) * unit, this.maxWaitMs)
      return new ShardOverloadedError(
        `Shard ${state.shard} was asked for more IDs than it makes within its ${this.maxDriftUnits * unit} ms drift allowance (${this.layout.capacityPerMs} per ms) and the ${this.maxWaitMs} ms it may wait. The clock is fine; nothing was issued. Ask for fewer IDs per call, spread rows over more shards, or raise maxDriftMs.`,
      )
    }
    if ((target - now) * unit > this.maxWaitMs) throw fail()
    let current = now
    let waited = 0
    while (current < target) {
      const ms = (target - current) * unit
      if (waited + ms > this.maxWaitMs) throw fail()
      this.sleep(ms)
      waited += ms
      current = this.now()
    }
  }

  private now(): number {
    const ms = this.clock()
    if (!Number.isFinite(ms)) {
      throw new ConfigurationError(
        `The clock of this InProcessSource returned ${describeValue(ms)}, not a number of ms since 1970: no ID was issued.`,
      )
    }
    const time = Math.floor((ms - this.layout.epoch) / this.layout.timeUnitMs)
    const checked = time >= 0 ? time : this.layout.timeAt(ms)
    if (Number.isNaN(this.firstSeen)) this.firstSeen = checked
    return checked
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
  sharding: Sharding,
  selection: ShardSelection,
): [(shard: number) => boolean, string, number[]] {
  const { logicalShards } = sharding
  if (selection === 'all') {
    checkListSize(logicalShards, selection)
    return [
      (shard) => Number.isInteger(shard) && shard >= 0 && shard < logicalShards,
      `all ${logicalShards} logical shards`,
      Array.from({ length: logicalShards }, (_, shard) => shard),
    ]
  }
  if (Array.isArray(selection)) {
    const list = selection as readonly number[]
    if (list.length === 0) throw new ConfigurationError('shards must not be an empty list.')
    checkListSize(list.length, selection)
    for (const shard of list) sharding.checkShard(shard)
    const set = new Set(list)
    return [
      (shard) => set.has(shard),
      `shards ${[...set].slice(0, 10).join(', ')}${set.size > 10 ? ', ...' : ''}`,
      [...set],
    ]
  }
  if (typeof selection !== 'object' || selection === null) {
    throw new ConfigurationError(
      `shards must be 'all', a list of logical shards or a { from, to } range, got ${describeValue(selection)}.`,
    )
  }
  const { from, to } = selection as { from: number; to: number }
  sharding.checkShard(from)
  sharding.checkShard(to)
  if (to < from) throw new InvalidArgumentError(`Shard range ${from}-${to} ends before it starts.`)
  checkListSize(to - from + 1, selection)
  return [
    (shard) => Number.isInteger(shard) && shard >= from && shard <= to,
    `shards ${from}-${to}`,
    Array.from({ length: to - from + 1 }, (_, i) => from + i),
  ]
}
