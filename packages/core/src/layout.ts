import {
  InvalidArgumentError,
  InvalidIdError,
  InvalidLayoutError,
  ShardOutOfRangeError,
  TimeExhaustedError,
} from './errors'
import { type IdInput, toBigInt, toSigned64, toUnsigned64 } from './id-value'

/** The fields an ID is made of. */
export type FieldName = 'time' | 'shard' | 'worker' | 'sequence'

/** What {@link defineLayout} takes. */
export interface LayoutOptions {
  /**
   * The instant the time field counts from: ms since 1970, a `Date`, or an ISO string.
   * Must not lie in the future. Pick it when you launch: a 41-bit field of ms lasts 69.7 years,
   * and IDs of a 64-bit layout turn negative in a signed BIGINT after half of that.
   */
  epoch: number | Date | string
  /** Width of the time field. */
  timeBits: number
  /** Width of the logical-shard field (13 bits = 8192 logical shards). */
  shardBits: number
  /** Width of the per-tick counter: 2^sequenceBits IDs per time unit per shard (and worker). */
  sequenceBits: number
  /**
   * Width of a worker field, so several processes can generate for the same shard.
   * @default 0
   */
  workerBits?: number
  /**
   * Length of one tick of the time field, in ms (10 reads Sonyflake IDs).
   * @default 1
   */
  timeUnitMs?: number
  /**
   * Field order from the most significant bit down.
   * @default ['time', 'shard', 'worker', 'sequence']
   */
  order?: readonly FieldName[]
  /**
   * Allow generating IDs with bit 63 set. In a signed BIGINT they are negative and sort before
   * every older ID, so this is off: generation fails with `TimeExhaustedError` instead.
   * Decoding always accepts both spellings.
   * @default false
   */
  allowSignBit?: boolean
  /**
   * Marks a layout for reading other systems' IDs only; ID sources refuse it.
   * @default false
   */
  decodeOnly?: boolean
  /**
   * A name for messages and metadata.
   * @default 'custom'
   */
  name?: string
}

/** The parts of an ID, as {@link Layout.compose} takes them. */
export interface IdParts {
  /** ms since 1970 (a `number` or a `Date`). */
  timestamp: number | Date
  shard: number
  sequence: number
  /** @default 0 */
  worker?: number
}

/** An ID taken apart by {@link Layout.decompose}. */
export interface DecodedId {
  /** The ID as a signed 64-bit value (what a BIGINT column stores). */
  id: bigint
  /** The same ID read as unsigned; equal to `id` until the sign bit is used. */
  unsigned: bigint
  /** The raw value of the time field, in time units since the epoch. */
  time: number
  /** When the ID was made, in ms since 1970 (rounded down to the time unit). */
  timestampMs: number
  /** When the ID was made. */
  timestamp: Date
  shard: number
  worker: number
  sequence: number
}

/** Smallest and largest ID of a time range (see {@link Layout.idRange}). */
export interface IdRange {
  min: bigint
  max: bigint
}

const DEFAULT_ORDER: readonly FieldName[] = ['time', 'shard', 'worker', 'sequence']
const FIELD_NAMES: readonly FieldName[] = ['time', 'shard', 'worker', 'sequence']

/**
 * A bit layout: epoch, time unit and field widths. Layouts are immutable data; create one with
 * {@link defineLayout} or use a preset ({@link instagram}). All methods are pure.
 *
 * IDs come out as the **signed** 64-bit value a BIGINT column stores, so a layout that uses bit 63
 * (with `allowSignBit`) yields negative `bigint`s, exactly as PostgreSQL returns them. Every method
 * that takes an ID accepts the signed and the unsigned spelling, as `bigint` or decimal string.
 *
 * @example
 * ```ts
 * import { instagram } from '@shardflake/core'
 *
 * const id = instagram.compose({ timestamp: Date.now(), shard: 1341, sequence: 7 })
 * instagram.shardOf(id) // 1341
 * instagram.capacityPerMs // 1024 IDs per ms per shard
 * ```
 */
export class Layout {
  readonly name: string
  /** The epoch in ms since 1970. */
  readonly epoch: number
  readonly timeUnitMs: number
  readonly timeBits: number
  readonly shardBits: number
  readonly workerBits: number
  readonly sequenceBits: number
  /** Field order from the most significant bit. */
  readonly order: readonly FieldName[]
  /** Sum of the widths (at most 64). */
  readonly totalBits: number
  readonly allowSignBit: boolean
  readonly decodeOnly: boolean
  /** Number of logical shards the layout can address: 2^shardBits. */
  readonly shardCount: number
  /** Number of workers the layout can address: 2^workerBits. */
  readonly workerCount: number
  /** Largest sequence value: 2^sequenceBits - 1. */
  readonly maxSequence: number
  /** IDs one shard (one worker of it) can get per ms: 2^sequenceBits / timeUnitMs. */
  readonly capacityPerMs: number
  /** When the time field runs out: no ID of this layout can be made from then on. */
  readonly timeEndsAt: Date
  /**
   * From when IDs of this layout are negative in a signed BIGINT, or `undefined` when the layout
   * leaves bit 63 unused (or gives it to a field other than time, which only `allowSignBit` or a
   * decode-only layout allows). Generation stops there unless `allowSignBit` is set.
   */
  readonly negativeFrom: Date | undefined
  /** Shift of each field, in bits from the least significant end (for SQL and Lua generators). */
  readonly shifts: Readonly<Record<FieldName, bigint>>
  /** Time values (units since the epoch) from this one on cannot be generated: the field or bit 63 ran out. */
  readonly timeLimit: number

  /** @internal Use {@link defineLayout}. */
  constructor(options: LayoutOptions, internal: { allowEmptyShard?: boolean } = {}) {
    const name = options.name ?? 'custom'
    const fail = (message: string): never => {
      throw new InvalidLayoutError(`Layout ${JSON.stringify(name)}: ${message}`)
    }
    const epoch = readEpoch(options.epoch, fail)
    const timeUnitMs = options.timeUnitMs ?? 1
    if (!Number.isSafeInteger(timeUnitMs) || timeUnitMs < 1) {
      fail(`timeUnitMs must be a positive integer, got ${timeUnitMs}.`)
    }
    const width = (field: string, value: unknown, min: number, max: number): number => {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
        fail(`${field} must be an integer from ${min} to ${max}, got ${String(value)}.`)
      }
      return value as number
    }
    const timeBits = width('timeBits', options.timeBits, 1, 63)
    const shardBits = width('shardBits', options.shardBits, internal.allowEmptyShard ? 0 : 1, 31)
    const sequenceBits = width('sequenceBits', options.sequenceBits, 1, 31)
    const workerBits = width('workerBits', options.workerBits ?? 0, 0, 31)
    const totalBits = timeBits + shardBits + sequenceBits + workerBits
    if (totalBits > 64) {
      fail(
        `the widths add up to ${totalBits} bits (time ${timeBits} + shard ${shardBits} + worker ${workerBits} + sequence ${sequenceBits}); at most 64 fit in a BIGINT.`,
      )
    }
    const order = options.order ?? DEFAULT_ORDER
    if (order.length !== 4 || FIELD_NAMES.some((field) => !order.includes(field))) {
      fail(`order must name each of ${FIELD_NAMES.join(', ')} once, got [${order.join(', ')}].`)
    }
    const widths: Record<FieldName, number> = {
      time: timeBits,
      shard: shardBits,
      worker: workerBits,
      sequence: sequenceBits,
    }
    const shifts = {} as Record<FieldName, bigint>
    let shift = 0
    for (const field of [...order].reverse()) {
      shifts[field] = BigInt(shift)
      shift += widths[field]
    }
    const usesSignBit = totalBits === 64
    const allowSignBit = options.allowSignBit ?? false
    // With 64 bits the highest field holds the sign bit. When that field is the time, IDs turn
    // negative on a known date and generation stops there; any other field would make some of
    // its values (shards, workers, sequences) negative from the start.
    const timeHoldsSignBit = order[0] === 'time'
    if (usesSignBit && !timeHoldsSignBit && !allowSignBit && !(options.decodeOnly ?? false)) {
      fail(
        `with 64 bits the highest field (${order[0]}) holds the sign bit, so some of its values would make negative IDs. Put time first, use at most 63 bits, or set allowSignBit if negative IDs are acceptable.`,
      )
    }

    this.name = name
    this.epoch = epoch
    this.timeUnitMs = timeUnitMs
    this.timeBits = timeBits
    this.shardBits = shardBits
    this.workerBits = workerBits
    this.sequenceBits = sequenceBits
    this.order = Object.freeze([...order])
    this.totalBits = totalBits
    this.allowSignBit = allowSignBit
    this.decodeOnly = options.decodeOnly ?? false
    this.shardCount = 2 ** shardBits
    this.workerCount = 2 ** workerBits
    this.maxSequence = 2 ** sequenceBits - 1
    this.capacityPerMs = 2 ** sequenceBits / timeUnitMs
    this.timeEndsAt = new Date(epoch + 2 ** timeBits * timeUnitMs)
    this.negativeFrom =
      usesSignBit && timeHoldsSignBit
        ? new Date(epoch + 2 ** (timeBits - 1) * timeUnitMs)
        : undefined
    this.shifts = Object.freeze(shifts)
    this.timeLimit =
      usesSignBit && timeHoldsSignBit && !allowSignBit ? 2 ** (timeBits - 1) : 2 ** timeBits
    Object.freeze(this)
  }

  /**
   * Puts an ID together.
   * @throws ShardOutOfRangeError / InvalidArgumentError for a field out of its range.
   * @throws TimeExhaustedError before the epoch, past the time field, or at the sign bit without
   * `allowSignBit`.
   */
  compose(parts: IdParts): bigint {
    const timestamp = parts.timestamp instanceof Date ? parts.timestamp.getTime() : parts.timestamp
    if (!Number.isFinite(timestamp)) {
      throw new InvalidArgumentError(`timestamp must be a finite number of ms or a valid Date.`)
    }
    return this.composeTime(this.timeAt(timestamp), parts.shard, parts.worker ?? 0, parts.sequence)
  }

  /**
   * Takes an ID apart. Accepts `bigint` or a decimal string, signed or unsigned spelling.
   * @throws InvalidIdError when the value is not an ID of this layout.
   */
  decompose(id: IdInput): DecodedId {
    const signed = this.parse(id)
    const unsigned = toUnsigned64(signed)
    const time = Number(this.field(unsigned, 'time', this.timeBits))
    const timestampMs = this.epoch + time * this.timeUnitMs
    return {
      id: signed,
      unsigned,
      time,
      timestampMs,
      timestamp: new Date(timestampMs),
      shard: Number(this.field(unsigned, 'shard', this.shardBits)),
      worker: Number(this.field(unsigned, 'worker', this.workerBits)),
      sequence: Number(this.field(unsigned, 'sequence', this.sequenceBits)),
    }
  }

  /** The logical shard of an ID: route a child row to its parent's shard with it. */
  shardOf(id: IdInput): number {
    return Number(this.field(toUnsigned64(this.parse(id)), 'shard', this.shardBits))
  }

  /** When an ID was made (to the time unit). */
  timeOf(id: IdInput): Date {
    const time = Number(this.field(toUnsigned64(this.parse(id)), 'time', this.timeBits))
    return new Date(this.epoch + time * this.timeUnitMs)
  }

  /**
   * The smallest and largest ID that can carry a time in `[from, to]` (both inclusive), for
   * range queries on the primary key instead of an index on a timestamp column:
   * `WHERE id BETWEEN min AND max`. Times before the epoch clamp to it.
   *
   * @example
   * ```ts
   * const { min, max } = instagram.idRange(new Date('2024-01-01'), new Date('2024-02-01'))
   * ```
   */
  idRange(from: number | Date, to: number | Date): IdRange {
    const start = Math.max(0, this.timeAt(toMs(from), true))
    const end = this.timeAt(toMs(to), true)
    if (end < start) {
      throw new InvalidArgumentError(`idRange: 'to' lies before 'from' (or before the epoch).`)
    }
    const last = Math.min(end, 2 ** this.timeBits - 1)
    const timeMask = ((1n << BigInt(this.timeBits)) - 1n) << this.shifts.time
    const allOnes = (1n << BigInt(this.totalBits)) - 1n
    const min = BigInt(start) << this.shifts.time
    const max = (BigInt(last) << this.shifts.time) | (allOnes & ~timeMask)
    return { min: toSigned64(min), max: toSigned64(max) }
  }

  /** The signed 64-bit spelling of an ID (what BIGINT stores). */
  toSigned(id: IdInput): bigint {
    return this.parse(id)
  }

  /** The unsigned spelling of an ID (for `BIGINT UNSIGNED` columns and sorting in JS). */
  toUnsigned(id: IdInput): bigint {
    return toUnsigned64(this.parse(id))
  }

  /** Plain data describing the layout, for metadata tables and `--json` output. */
  toJSON(): LayoutDescription {
    return {
      name: this.name,
      epoch: this.epoch,
      epochIso: new Date(this.epoch).toISOString(),
      timeUnitMs: this.timeUnitMs,
      timeBits: this.timeBits,
      shardBits: this.shardBits,
      workerBits: this.workerBits,
      sequenceBits: this.sequenceBits,
      order: [...this.order],
      allowSignBit: this.allowSignBit,
      capacityPerMs: this.capacityPerMs,
      timeEndsAt: this.timeEndsAt.toISOString(),
      negativeFrom: this.negativeFrom?.toISOString() ?? null,
    }
  }

  /**
   * True when both layouts make the same IDs from the same parts (names aside).
   * Installers compare the layout in the database with this.
   */
  equals(other: Layout | LayoutDescription): boolean {
    return sameLayout(this, other)
  }

  /**
   * Time units since the epoch for a ms timestamp.
   * @throws TimeExhaustedError for an instant before the epoch, unless `clamp` (then it may be negative).
   */
  timeAt(timestampMs: number, clamp = false): number {
    const time = Math.floor((timestampMs - this.epoch) / this.timeUnitMs)
    if (time < 0 && !clamp) {
      throw new TimeExhaustedError(
        `${new Date(timestampMs).toISOString()} lies before the epoch of layout ${JSON.stringify(this.name)} (${new Date(this.epoch).toISOString()}).`,
      )
    }
    return time
  }

  /**
   * Composes an ID from raw field values (`time` in units since the epoch), validating each:
   * what every source that keeps its own counter (SQL, Lua) does, in JavaScript.
   * @throws TimeExhaustedError, ShardOutOfRangeError, InvalidArgumentError
   */
  composeTime(time: number, shard: number, worker: number, sequence: number): bigint {
    this.checkTime(time)
    this.checkShard(shard)
    checkField('worker', worker, this.workerCount)
    checkField('sequence', sequence, this.maxSequence + 1)
    const s = this.shifts
    return toSigned64(
      (BigInt(time) << s.time) |
        (BigInt(shard) << s.shard) |
        (BigInt(worker) << s.worker) |
        (BigInt(sequence) << s.sequence),
    )
  }

  /**
   * Throws unless `shard` is an integer from 0 to `shardCount - 1`.
   * @throws ShardOutOfRangeError
   */
  checkShard(shard: number): void {
    if (!Number.isInteger(shard) || shard < 0 || shard >= this.shardCount) {
      throw new ShardOutOfRangeError(
        shard,
        `Shard ${String(shard)} is outside layout ${JSON.stringify(this.name)}, which has shards 0 to ${this.shardCount - 1}.`,
      )
    }
  }

  /**
   * Throws unless IDs can still be made at `time` (units since the epoch).
   * @throws TimeExhaustedError
   */
  checkTime(time: number): void {
    if (time >= this.timeLimit) {
      const signBit = this.timeLimit < 2 ** this.timeBits
      throw new TimeExhaustedError(
        signBit
          ? `Layout ${JSON.stringify(this.name)} reached bit 63 on ${this.negativeFrom?.toISOString()}: from now on its IDs are negative in a signed BIGINT and sort before all older IDs. Move to a layout with a later epoch, or set allowSignBit if you accept that.`
          : `The time field of layout ${JSON.stringify(this.name)} ran out on ${this.timeEndsAt.toISOString()}.`,
      )
    }
  }

  /**
   * Throws unless this layout can make IDs now and for at least `marginMs` more: sources and
   * installers call it before anything is created.
   * @returns the ms left before the time field (or bit 63) runs out.
   * @throws InvalidLayoutError for a decode-only layout (a preset for reading other systems' IDs).
   * @throws TimeExhaustedError when the time field is used up, or runs out within `marginMs`.
   */
  checkGenerating(now: number = Date.now(), marginMs = 0): number {
    if (this.decodeOnly) {
      throw new InvalidLayoutError(
        `Layout ${JSON.stringify(this.name)} is for decoding other systems' IDs; define your own layout to generate.`,
      )
    }
    const endsAt = this.epoch + this.timeLimit * this.timeUnitMs
    const left = endsAt - now
    if (left <= marginMs) {
      throw new TimeExhaustedError(
        left <= 0
          ? `Layout ${JSON.stringify(this.name)} can no longer make IDs: its time field (epoch ${new Date(this.epoch).toISOString()}) ran out on ${new Date(endsAt).toISOString()}. Define a layout with a later epoch.`
          : `Layout ${JSON.stringify(this.name)} runs out of time on ${new Date(endsAt).toISOString()}, within ${marginMs} ms. Define a layout with a later epoch.`,
      )
    }
    return left
  }

  private parse(id: IdInput): bigint {
    const signed = toSigned64(toBigInt(id))
    if (this.totalBits < 64 && (signed < 0n || signed >= 1n << BigInt(this.totalBits))) {
      throw new InvalidIdError(
        `${String(id)} is not an ID of layout ${JSON.stringify(this.name)}: it has more than ${this.totalBits} bits.`,
      )
    }
    return signed
  }

  private field(unsigned: bigint, field: FieldName, bits: number): bigint {
    return (unsigned >> this.shifts[field]) & ((1n << BigInt(bits)) - 1n)
  }
}

/** The fields that decide which IDs a layout makes. */
type LayoutFields = Pick<
  LayoutDescription,
  'epoch' | 'timeUnitMs' | 'timeBits' | 'shardBits' | 'workerBits' | 'sequenceBits'
> & { readonly order: readonly FieldName[] }

/** True when both make the same IDs from the same parts (names aside). */
function sameLayout(a: LayoutFields, b: LayoutFields): boolean {
  return (
    a.epoch === b.epoch &&
    a.timeUnitMs === b.timeUnitMs &&
    a.timeBits === b.timeBits &&
    a.shardBits === b.shardBits &&
    a.workerBits === b.workerBits &&
    a.sequenceBits === b.sequenceBits &&
    a.order.join() === b.order.join()
  )
}

/** {@link Layout.toJSON}'s shape. */
export interface LayoutDescription {
  name: string
  epoch: number
  epochIso: string
  timeUnitMs: number
  timeBits: number
  shardBits: number
  workerBits: number
  sequenceBits: number
  order: FieldName[]
  allowSignBit: boolean
  capacityPerMs: number
  timeEndsAt: string
  negativeFrom: string | null
}

/**
 * Defines a layout, validating it: every width a positive integer (worker may be 0), the sum at
 * most 64, the epoch a real instant that is not in the future.
 *
 * @throws InvalidLayoutError with a message that names the offending option.
 * @example
 * ```ts
 * import { defineLayout } from '@shardflake/core'
 *
 * const layout = defineLayout({
 *   name: 'acme',
 *   epoch: '2025-01-01T00:00:00Z',
 *   timeBits: 41,
 *   shardBits: 13,
 *   sequenceBits: 10,
 * })
 * layout.negativeFrom // 2059-11-04: pick the epoch at launch
 * ```
 */
export function defineLayout(options: LayoutOptions): Layout {
  return new Layout(options)
}

function readEpoch(value: LayoutOptions['epoch'], fail: (message: string) => never): number {
  let ms: number
  if (value instanceof Date) ms = value.getTime()
  else if (typeof value === 'string') ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value)
  else if (typeof value === 'number') ms = value
  else return fail(`epoch must be ms since 1970, a Date or an ISO string.`)
  if (!Number.isSafeInteger(ms) || ms < 0) {
    return fail(`epoch ${JSON.stringify(value)} is not a valid instant at or after 1970.`)
  }
  if (ms > Date.now()) {
    return fail(
      `epoch ${new Date(ms).toISOString()} lies in the future; IDs could not be made before it.`,
    )
  }
  return ms
}

function toMs(value: number | Date): number {
  const ms = value instanceof Date ? value.getTime() : value
  if (!Number.isFinite(ms)) throw new InvalidArgumentError(`Not a valid time: ${String(value)}.`)
  return ms
}

function checkField(field: string, value: number, count: number): void {
  if (!Number.isInteger(value) || value < 0 || value >= count) {
    throw new InvalidArgumentError(
      `${field} must be an integer from 0 to ${count - 1}, got ${String(value)}.`,
    )
  }
}
