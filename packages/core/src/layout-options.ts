import { InvalidLayoutError } from './errors'
import { describeValue } from './known-options'

/** The last instant a `Date` can hold, in ms since 1970. */
const MAX_DATE_MS = 8.64e15

/** An instant for a message: its ISO form, or the number when no Date can hold it. */
export function describeInstant(ms: number): string {
  return Number.isFinite(ms) && Math.abs(ms) <= MAX_DATE_MS
    ? new Date(ms).toISOString()
    : `${describeValue(ms)} ms since 1970`
}

const LAYOUT_OPTIONS = [
  'name',
  'epoch',
  'timeBits',
  'shardBits',
  'sequenceBits',
  'workerBits',
  'timeUnitMs',
  'order',
  'allowSignBit',
  'decodeOnly',
]

const ISO_INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/

/**
 * Reads an ISO-8601 date (`2025-01-01`, read as UTC) or date-time (`2025-01-01T12:00:00Z`,
 * `2025-01-01T12:00:00.5+02:00`; without an offset, UTC) as ms since 1970. Anything else, or a
 * date that does not exist (`2025-02-30`), gives `undefined`: unlike `Date.parse`, text such as
 * `'x 1'` or `'hello 2020'` is never read as some date.
 *
 * @example
 * ```ts
 * import { parseInstant } from '@shardflake/core'
 *
 * parseInstant('2025-01-01') // 1735689600000
 * parseInstant('x 1') // undefined
 * ```
 */
export function parseInstant(text: string): number | undefined {
  if (typeof text !== 'string') return undefined
  const match = ISO_INSTANT.exec(text.trim())
  if (!match) return undefined
  const [, year, month, day, hour, minute, second, offset] = match
  const iso = `${year}-${month}-${day}T${hour ?? '00'}:${minute ?? '00'}:${second ?? '00'}${
    text
      .trim()
      .match(/\.\d{1,9}/)?.[0]
      ?.slice(0, 4) ?? ''
  }${offset === undefined ? 'Z' : offset.length === 5 ? `${offset.slice(0, 3)}:${offset.slice(3)}` : offset}`
  const ms = Date.parse(iso)
  if (!Number.isFinite(ms)) return undefined
  // Date.parse rolls 2025-02-30 over to March: a date that does not exist is refused.
  const check = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)))
  if (
    check.getUTCFullYear() !== Number(year) ||
    check.getUTCMonth() !== Number(month) - 1 ||
    check.getUTCDate() !== Number(day)
  ) {
    return undefined
  }
  return ms
}

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

/** The fields that decide which IDs a layout makes. */
type LayoutFields = Pick<
  LayoutDescription,
  'epoch' | 'timeUnitMs' | 'timeBits' | 'shardBits' | 'workerBits' | 'sequenceBits'
> & { readonly order: readonly FieldName[] }

/** True when both make the same IDs from the same parts (names aside). */
export function sameLayout(a: LayoutFields, b: LayoutFields): boolean {
  if (typeof b !== 'object' || b === null || !Array.isArray(b.order)) return false
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

const DEFAULT_ORDER: readonly FieldName[] = ['time', 'shard', 'worker', 'sequence']
const FIELD_NAMES: readonly FieldName[] = ['time', 'shard', 'worker', 'sequence']

/**
 * Checks a layout's options and works out the field shifts, and whether the time field holds the
 * sign bit (`usesSignBit`: all 64 bits are used; `timeHoldsSignBit`: time is the highest field).
 * @throws InvalidLayoutError naming the offending option.
 */
export function readLayoutOptions(
  options: LayoutOptions,
  internal: { allowEmptyShard?: boolean } = {},
) {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidLayoutError(
      `A layout needs its options: { epoch, timeBits, shardBits, sequenceBits }, got ${describeValue(options)}. Use a preset (instagram) or defineLayout({ epoch: '2025-01-01T00:00:00Z', timeBits: 41, shardBits: 13, sequenceBits: 10 }).`,
    )
  }
  const rawName: unknown = options.name ?? 'custom'
  if (typeof rawName !== 'string') {
    throw new InvalidLayoutError(`A layout's name must be a string, got ${describeValue(rawName)}.`)
  }
  const name = rawName
  const fail = (message: string): never => {
    throw new InvalidLayoutError(`Layout ${JSON.stringify(name)}: ${message}`)
  }
  for (const [key, value] of Object.entries(options)) {
    if (!LAYOUT_OPTIONS.includes(key) && value !== undefined) {
      fail(`it has no option ${JSON.stringify(key)}. Known options: ${LAYOUT_OPTIONS.join(', ')}.`)
    }
  }
  for (const flag of ['allowSignBit', 'decodeOnly'] as const) {
    const value: unknown = options[flag]
    if (value !== undefined && typeof value !== 'boolean') {
      fail(`${flag} must be true or false, got ${describeValue(value)}.`)
    }
  }
  const epoch = readEpoch(options.epoch, fail)
  const timeUnitMs: unknown = options.timeUnitMs ?? 1
  if (typeof timeUnitMs !== 'number' || !Number.isSafeInteger(timeUnitMs) || timeUnitMs < 1) {
    return fail(`timeUnitMs must be a positive integer, got ${describeValue(timeUnitMs)}.`)
  }
  const width = (field: string, value: unknown, min: number, max: number): number => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      fail(`${field} must be an integer from ${min} to ${max}, got ${describeValue(value)}.`)
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
  const order: unknown = options.order ?? DEFAULT_ORDER
  if (
    !Array.isArray(order) ||
    order.length !== 4 ||
    FIELD_NAMES.some((field) => !order.includes(field))
  ) {
    return fail(
      `order must name each of ${FIELD_NAMES.join(', ')} once, got ${Array.isArray(order) ? `[${order.map((field) => describeValue(field)).join(', ')}]` : describeValue(order)}.`,
    )
  }
  // Every instant an ID can carry must be a valid Date (at most 8.64e15 ms since 1970), so that
  // decoding never yields an Invalid Date and times stay exact numbers.
  if (epoch + 2 ** timeBits * timeUnitMs > MAX_DATE_MS) {
    fail(
      `a ${timeBits}-bit time field of ${timeUnitMs} ms ticks from ${new Date(epoch).toISOString()} would run past the last instant a Date can hold (year 275760). Use fewer time bits (at most ${Math.floor(Math.log2((MAX_DATE_MS - epoch) / timeUnitMs))} here) or a shorter time unit.`,
    )
  }
  const widths: Record<FieldName, number> = {
    time: timeBits,
    shard: shardBits,
    worker: workerBits,
    sequence: sequenceBits,
  }
  const shifts = {} as Record<FieldName, bigint>
  let shift = 0
  for (const field of [...(order as FieldName[])].reverse()) {
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

  return {
    name,
    epoch,
    timeUnitMs,
    timeBits,
    shardBits,
    workerBits,
    sequenceBits,
    order: order as readonly FieldName[],
    totalBits,
    allowSignBit,
    shifts,
    usesSignBit,
    timeHoldsSignBit,
  }
}

function readEpoch(value: LayoutOptions['epoch'], fail: (message: string) => never): number {
  let ms: number
  if (value instanceof Date) ms = value.getTime()
  else if (typeof value === 'string') {
    const parsed = /^\d{1,16}$/.test(value) ? Number(value) : parseInstant(value)
    if (parsed === undefined) {
      return fail(
        `epoch ${describeValue(value)} is not a valid instant: give an ISO-8601 date or date-time (like '2025-01-01' or '2025-01-01T00:00:00Z') or ms since 1970.`,
      )
    }
    ms = parsed
  } else if (typeof value === 'number') ms = value
  else {
    return fail(
      `epoch must be ms since 1970, a Date or an ISO-8601 string, got ${describeValue(value)}.`,
    )
  }
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
