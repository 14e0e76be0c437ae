import { describe, expect, it } from 'vitest'
import { InvalidArgumentError, readSourceDuration, SOURCE_DEFAULTS } from '../src/index'

describe('readSourceDuration', () => {
  it('gives each shared option its SOURCE_DEFAULTS default and checks the bounds', () => {
    for (const name of ['maxDriftMs', 'maxWaitMs', 'timeoutMs', 'retryAfterMs'] as const) {
      expect(readSourceDuration(name, undefined)).toBe(SOURCE_DEFAULTS[name])
    }
    expect(readSourceDuration('timeoutMs', 5, { min: 1 })).toBe(5)
    expect(() => readSourceDuration('timeoutMs', 0, { min: 1 })).toThrow(InvalidArgumentError)
    expect(() => readSourceDuration('maxWaitMs', 1.5)).toThrow(/maxWaitMs/)
  })
})
