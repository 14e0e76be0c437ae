import { InvalidIdError, UnsafeNumberError } from './errors'

/**
 * An ID as the outside world spells it: a `bigint`, or a decimal string (what node-postgres,
 * mysql2 and TypeORM return for BIGINT). Negative values are the signed spelling PostgreSQL
 * and MySQL use once the sign bit is set.
 */
export type IdInput = bigint | string

const MIN_SIGNED = -(1n << 63n)
const MAX_UNSIGNED = (1n << 64n) - 1n
const DECIMAL = /^-?\d+$/

/**
 * Reads an {@link IdInput} (or a safe integer `number` at run time) into a `bigint` in the
 * 64-bit range, signed or unsigned spelling.
 * @throws InvalidIdError for anything that is not a 64-bit integer.
 * @throws UnsafeNumberError for a `number` that is not a safe integer.
 */
export function toBigInt(value: unknown, what = 'ID'): bigint {
  let id: bigint
  if (typeof value === 'bigint') {
    id = value
  } else if (typeof value === 'string') {
    const text = value.trim()
    if (!DECIMAL.test(text)) {
      throw new InvalidIdError(`${what} ${JSON.stringify(value)} is not a decimal integer.`)
    }
    id = BigInt(text)
  } else if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new UnsafeNumberError(what, value)
    id = BigInt(value)
  } else {
    throw new InvalidIdError(
      `${what} must be a bigint or a decimal string, got ${value === null ? 'null' : typeof value}.`,
    )
  }
  if (id < MIN_SIGNED || id > MAX_UNSIGNED) {
    throw new InvalidIdError(`${what} ${id} does not fit in 64 bits.`)
  }
  return id
}

/** The unsigned 64-bit spelling of a signed or unsigned 64-bit integer. */
export function toUnsigned64(id: bigint): bigint {
  return id < 0n ? id + (1n << 64n) : id
}

/** The signed 64-bit spelling (what a PostgreSQL or MySQL `BIGINT` column stores). */
export function toSigned64(id: bigint): bigint {
  return id >= 1n << 63n ? id - (1n << 64n) : id
}
