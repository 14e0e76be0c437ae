import { ConnectionLostError, SourceUnavailableError } from '@shardflake/core'
import { describe, expect, it } from 'vitest'
import { translateError } from '../src/errors'

/** An error as mysql2 builds it from a server's error packet. */
function serverError(errno: number, code: string, sqlMessage: string): Error {
  return Object.assign(new Error(sqlMessage), { errno, code, sqlState: 'HY000', sqlMessage })
}

const context = { what: 'logical shard 18 (database shard_18)', shard: 18 }

describe('translateError', () => {
  // After kill -9, MariaDB marks an Aria or MyISAM table that was open for writing as crashed
  // and repairs it on the next open; a call in between gets one of these.
  it.each([
    [145, 'HA_ERR_CRASHED_ON_USAGE'],
    [126, 'HA_ERR_CRASHED'],
    [144, 'HA_ERR_CRASHED_ON_REPAIR'],
    [1194, 'ER_CRASHED_ON_USAGE'],
    [1195, 'ER_CRASHED_ON_REPAIR'],
  ])(
    'a counter table marked crashed (%i %s) is a retryable SourceUnavailableError',
    (errno, code) => {
      const driver = serverError(errno, code, "Table './shard_18/sf_counter' is marked as crashed")
      const error = translateError(driver, context)
      expect(error).toBeInstanceOf(SourceUnavailableError)
      expect(error.retryable).toBe(true)
      expect(error.cause).toBe(driver)
      expect(error.message).toMatch(/^Logical shard 18 .*marked crashed.*REPAIR TABLE/)
    },
  )

  it('a fatal connection error is a ConnectionLostError', () => {
    const driver = Object.assign(new Error('Connection lost'), {
      code: 'PROTOCOL_CONNECTION_LOST',
      fatal: true,
    })
    expect(translateError(driver, context)).toBeInstanceOf(ConnectionLostError)
  })
})
