import { describe, expect, it } from 'vitest'
import { checkKnownOptions, InvalidArgumentError } from '../src/index'

const known = ['timeoutMs', 'maxDriftMs', 'prefetch'] as const

describe('checkKnownOptions', () => {
  it('passes known options and ignores properties set to undefined', () => {
    expect(() => checkKnownOptions('X options', { timeoutMs: 1 }, known)).not.toThrow()
    expect(() => checkKnownOptions('X options', { other: undefined }, known)).not.toThrow()
    expect(() =>
      checkKnownOptions('X options', undefined, known, { required: false }),
    ).not.toThrow()
  })

  it('names the closest known option for a misspelling', () => {
    expect(() => checkKnownOptions('X options', { timeoutMS: 1 }, known)).toThrow(
      /X options has no option "timeoutMS"\. Did you mean "timeoutMs"\?/,
    )
    expect(() => checkKnownOptions('X options', { maxDriftMS: 1 }, known)).toThrow(/"maxDriftMs"/)
  })

  it('suggests nothing for a name far from every known one', () => {
    let message = ''
    try {
      checkKnownOptions('X options', { colour: 'red' }, known)
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidArgumentError)
      message = (error as Error).message
    }
    expect(message).toMatch(/no option "colour"\. Known options: timeoutMs, maxDriftMs, prefetch\./)
  })

  it('refuses what is not an options object', () => {
    for (const value of [null, 'x', 5, [], undefined]) {
      expect(() => checkKnownOptions('X options', value, known)).toThrow(InvalidArgumentError)
    }
  })
})
