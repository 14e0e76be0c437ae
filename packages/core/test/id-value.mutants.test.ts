import { describe, expect, it } from 'vitest'
import {
  InvalidArgumentError,
  InvalidIdError,
  integerShard,
  toBigInt,
  toSigned64,
  toUnsigned64,
} from '../src'

const MIN_SIGNED = -(2n ** 63n)
const MAX_UNSIGNED = 2n ** 64n - 1n

describe('64-bit ID values at their edges', () => {
  it('accepts both ends of the 64-bit range and refuses one past each, naming the value', () => {
    expect(toBigInt(MIN_SIGNED)).toBe(MIN_SIGNED)
    expect(toBigInt(MAX_UNSIGNED.toString())).toBe(MAX_UNSIGNED)
    expect(() => toBigInt(MIN_SIGNED - 1n)).toThrow(InvalidIdError)
    expect(() => toBigInt(MAX_UNSIGNED + 1n, 'The ID of Post')).toThrow(
      `The ID of Post ${MAX_UNSIGNED + 1n} does not fit in 64 bits.`,
    )
  })

  it('reads a decimal string with spaces around it, as a driver or a form may hand it over', () => {
    expect(toBigInt(' 42 ')).toBe(42n)
    expect(() => toBigInt('4 2')).toThrow('ID "4 2" is not a decimal integer.')
    expect(() => toBigInt(null)).toThrow('ID must be a bigint or a decimal string, got null.')
    expect(() => toBigInt(true)).toThrow('got boolean.')
  })

  it('maps between the signed and the unsigned spelling exactly at 0, 2^63 and -1', () => {
    expect(toUnsigned64(0n)).toBe(0n)
    expect(toUnsigned64(1n)).toBe(1n)
    expect(toUnsigned64(-1n)).toBe(MAX_UNSIGNED)
    expect(toUnsigned64(MIN_SIGNED)).toBe(2n ** 63n)
    expect(toSigned64(2n ** 63n - 1n)).toBe(2n ** 63n - 1n)
    expect(toSigned64(2n ** 63n)).toBe(MIN_SIGNED)
    expect(toSigned64(MAX_UNSIGNED)).toBe(-1n)
  })
})

describe('integer shard keys at their edges', () => {
  it('reads only bare digit strings as integers, and allows a single logical shard', () => {
    // A padded digit string is text: refused as an integer, hashed as a key (as in SQL).
    expect(() => integerShard(' 31341 ', 2000)).toThrow(InvalidArgumentError)
    expect(integerShard('31341', 2000)).toBe(1341)
    expect(integerShard(31341, 1)).toBe(0)
    expect(() => integerShard(5, 0)).toThrow('logicalShards must be a positive integer, got 0.')
    expect(() => integerShard(5, 1.5)).toThrow(InvalidArgumentError)
  })
})
