import {
  InvalidArgumentError,
  InvalidIdError,
  InvalidLayoutError,
  ShardOutOfRangeError,
  TimeExhaustedError,
} from './errors'
import { type IdInput, toBigInt, toSigned64, toUnsigned64 } from './id-value'
import { describeValue } from './known-options'
import {
  describeInstant,
  type FieldName,
  type LayoutDescription,
  type LayoutOptions,
  readLayoutOptions,
  sameLayout,
} from './layout-options'

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
  /** IDs below this (from 0) are read as they are: no sign to fold, no bit past the layout's. */
  readonly #plainBelow: bigint
  readonly #shardShift: bigint
  readonly #shardMask: bigint
  /** `#plainBelow` in decimal: a digit string shorter than it, or as long and less, is below it. */
  readonly #plainBelowText: string
  /**
   * The bits up to the shard field's end (its shift plus its width) as a mask, when they fit in
   * 31: a digit string's shard is then read in 32-bit integers, without a `bigint`. 0 otherwise.
   */
  readonly #lowMask: number
  /** `#shardShift` and `#shardMask` as numbers, for `#lowMask`'s bits. */
  readonly #lowShift: number
  readonly #lowShardMask: number

  /** @internal Use {@link defineLayout}. */
  constructor(options: LayoutOptions, internal: { allowEmptyShard?: boolean } = {}) {
    const o = readLayoutOptions(options, internal)
    this.name = o.name
    this.epoch = o.epoch
    this.timeUnitMs = o.timeUnitMs
    this.timeBits = o.timeBits
    this.shardBits = o.shardBits
    this.workerBits = o.workerBits
    this.sequenceBits = o.sequenceBits
    this.order = Object.freeze([...o.order])
    this.totalBits = o.totalBits
    this.allowSignBit = o.allowSignBit
    this.decodeOnly = options.decodeOnly ?? false
    this.shardCount = 2 ** o.shardBits
    this.workerCount = 2 ** o.workerBits
    this.maxSequence = 2 ** o.sequenceBits - 1
    this.capacityPerMs = 2 ** o.sequenceBits / o.timeUnitMs
    this.timeEndsAt = new Date(o.epoch + 2 ** o.timeBits * o.timeUnitMs)
    this.negativeFrom =
      o.usesSignBit && o.timeHoldsSignBit
        ? new Date(o.epoch + 2 ** (o.timeBits - 1) * o.timeUnitMs)
        : undefined
    this.shifts = Object.freeze(o.shifts)
    this.timeLimit =
      o.usesSignBit && o.timeHoldsSignBit && !o.allowSignBit
        ? 2 ** (o.timeBits - 1)
        : 2 ** o.timeBits
    this.#plainBelow = 1n << BigInt(Math.min(o.totalBits, 63))
    this.#shardShift = o.shifts.shard
    this.#shardMask = (1n << BigInt(o.shardBits)) - 1n
    this.#plainBelowText = this.#plainBelow.toString()
    const shardEnd = Number(o.shifts.shard) + o.shardBits
    this.#lowMask = shardEnd <= 31 ? 2 ** shardEnd - 1 : 0
    this.#lowShift = Number(o.shifts.shard)
    this.#lowShardMask = 2 ** o.shardBits - 1
    Object.freeze(this)
  }

  /**
   * Puts an ID together.
   * @throws ShardOutOfRangeError / InvalidArgumentError for a field out of its range.
   * @throws TimeExhaustedError before the epoch, past the time field, or at the sign bit without
   * `allowSignBit`.
   */
  compose(parts: IdParts): bigint {
    if (typeof parts !== 'object' || parts === null) {
      throw new InvalidArgumentError(
        `compose takes the parts of an ID: { timestamp, shard, sequence, worker? }, got ${describeValue(parts)}.`,
      )
    }
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
    // The common case, a bigint ID of this layout, without the conversions `parse` makes: every
    // router reads the shard of every row it writes.
    if (typeof id === 'bigint' && id >= 0n && id < this.#plainBelow) {
      return Number((id >> this.#shardShift) & this.#shardMask)
    }
    // The same for the decimal string a driver returns for a BIGINT column.
    const shard = typeof id === 'string' ? this.shardOfDigits(id) : undefined
    if (shard !== undefined) return shard
    return Number(this.field(toUnsigned64(this.parse(id)), 'shard', this.shardBits))
  }

  /**
   * The shard of an ID spelled as plain decimal digits below `#plainBelow`, read digit by digit
   * modulo 2^(the shard field's end); `undefined` for any other string (signs, spaces, leading
   * zeros past the length, values from `#plainBelow` on), or when the field ends past bit 31.
   */
  private shardOfDigits(text: string): number | undefined {
    const mask = this.#lowMask
    const limit = this.#plainBelowText
    const length = text.length
    if (mask === 0 || length === 0 || length > limit.length) return undefined
    if (length === limit.length && text >= limit) return undefined
    let low = 0
    for (let index = 0; index < length; index++) {
      const digit = text.charCodeAt(index) - 0x30
      if (digit < 0 || digit > 9) return undefined
      // Below 2^35, exact in a double; `&` keeps it modulo 2^32, then the mask's bits.
      low = (low * 10 + digit) & mask
    }
    return (low >>> this.#lowShift) & this.#lowShardMask
  }

  /** When an ID was made (to the time unit). */
  timeOf(id: IdInput): Date {
    const time = Number(this.field(toUnsigned64(this.parse(id)), 'time', this.timeBits))
    return new Date(this.epoch + time * this.timeUnitMs)
  }

  /**
   * The smallest and largest ID that can carry a time in `[from, to]` (both inclusive), for
   * range queries on the primary key instead of an index on a timestamp column:
   * `WHERE id BETWEEN min AND max`.
   *
   * The range is **clamped** to the times the layout can hold: a `from` before the epoch starts at
   * the epoch, a `to` past the layout's last time (where its time field runs out, or, without
   * `allowSignBit`, where its IDs would turn negative) ends there. So `min <= max` always holds and
   * both are IDs of this layout. A range that lies wholly outside is refused rather than clamped
   * to a range that would match other times' IDs.
   *
   * @throws InvalidArgumentError when `to` lies before `from` or before the epoch, when `from`
   *   lies past the layout's last time, or (with `allowSignBit`) when the range spans the instant
   *   IDs turn negative: no single `BETWEEN` covers both signs; query both halves, split at
   *   `negativeFrom`.
   * @example
   * ```ts
   * const { min, max } = instagram.idRange(new Date('2024-01-01'), new Date('2024-02-01'))
   * ```
   */
  idRange(from: number | Date, to: number | Date): IdRange {
    const start = Math.max(0, this.timeAt(toMs(from, 'from'), true))
    const end = this.timeAt(toMs(to, 'to'), true)
    if (end < start) {
      throw new InvalidArgumentError(`idRange: 'to' lies before 'from' (or before the epoch).`)
    }
    const lastTime = this.timeLimit - 1
    if (start > lastTime) {
      throw new InvalidArgumentError(
        `idRange: 'from' (${describeInstant(toMs(from, 'from'))}) lies past the last time layout ${JSON.stringify(this.name)} can hold (${new Date(this.epoch + this.timeLimit * this.timeUnitMs).toISOString()}): no ID of it carries such a time.`,
      )
    }
    const last = Math.min(end, lastTime)
    const timeMask = ((1n << BigInt(this.timeBits)) - 1n) << this.shifts.time
    const allOnes = (1n << BigInt(this.totalBits)) - 1n
    const min = toSigned64(BigInt(start) << this.shifts.time)
    const max = toSigned64((BigInt(last) << this.shifts.time) | (allOnes & ~timeMask))
    if (min > max) {
      throw new InvalidArgumentError(
        `idRange: the range spans ${this.negativeFrom?.toISOString()}, where IDs of layout ${JSON.stringify(this.name)} turn negative in a signed BIGINT, so no single BETWEEN covers it. Query two ranges, split at layout.negativeFrom.`,
      )
    }
    return { min, max }
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
    if (typeof timestampMs !== 'number' || !Number.isFinite(timestampMs)) {
      throw new InvalidArgumentError(
        `A timestamp must be a finite number of ms since 1970, got ${describeValue(timestampMs)}.`,
      )
    }
    const time = Math.floor((timestampMs - this.epoch) / this.timeUnitMs)
    if (time < 0 && !clamp) {
      throw new TimeExhaustedError(
        `${describeInstant(timestampMs)} lies before the epoch of layout ${JSON.stringify(this.name)} (${new Date(this.epoch).toISOString()}).`,
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
        `Shard ${describeValue(shard)} is outside layout ${JSON.stringify(this.name)}, which has shards 0 to ${this.shardCount - 1}.`,
      )
    }
  }

  /**
   * Throws unless IDs can still be made at `time` (units since the epoch).
   * @throws TimeExhaustedError
   */
  checkTime(time: number): void {
    if (!Number.isInteger(time) || time < 0) {
      throw new InvalidArgumentError(
        `time must be a whole number of time units since the epoch (0 or more), got ${describeValue(time)}.`,
      )
    }
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
    if (typeof now !== 'number' || !Number.isFinite(now)) {
      throw new InvalidArgumentError(`now must be ms since 1970, got ${describeValue(now)}.`)
    }
    if (typeof marginMs !== 'number' || !(marginMs >= 0)) {
      throw new InvalidArgumentError(
        `marginMs must be a number of ms (0 or more), got ${describeValue(marginMs)}.`,
      )
    }
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

function toMs(value: number | Date, what: string): number {
  const ms = value instanceof Date ? value.getTime() : value
  if (typeof ms !== 'number' || !Number.isFinite(ms)) {
    throw new InvalidArgumentError(
      `idRange: '${what}' must be a Date or ms since 1970, got ${value instanceof Date ? 'an invalid Date' : describeValue(value)}.`,
    )
  }
  return ms
}

function checkField(field: string, value: number, count: number): void {
  if (!Number.isInteger(value) || value < 0 || value >= count) {
    throw new InvalidArgumentError(
      `${field} must be an integer from 0 to ${count - 1}, got ${describeValue(value)}.`,
    )
  }
}
