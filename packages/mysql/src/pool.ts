import { ConfigurationError } from '@shardflake/core'
import type { Pool, PoolOptions } from 'mysql2/promise'

/**
 * The mysql2 options shardflake needs on every pool: BIGINT values come back as decimal strings,
 * never as JavaScript numbers (which lose precision above 2^53).
 */
export const BIG_NUMBER_OPTIONS = { supportBigNumbers: true, bigNumberStrings: true } as const

/**
 * Creates a mysql2 promise pool from a URL (`mysql://user:pass@host:3306/db`) or options, with
 * {@link BIG_NUMBER_OPTIONS} forced on. mysql2 is loaded only when this is called.
 *
 * @example
 * ```ts
 * const pool = await createMysqlPool(process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
 * ```
 */
export async function createMysqlPool(config: string | PoolOptions): Promise<Pool> {
  const mysql = await import('mysql2/promise')
  const createPool = mysql.createPool ?? mysql.default.createPool
  const options: PoolOptions = typeof config === 'string' ? { uri: config } : { ...config }
  return createPool({ ...options, ...BIG_NUMBER_OPTIONS })
}

interface PoolConfigShape {
  pool?: {
    config?: { connectionConfig?: { supportBigNumbers?: boolean; bigNumberStrings?: boolean } }
  }
}

/**
 * Throws unless the pool returns BIGINT as strings (`supportBigNumbers` and `bigNumberStrings`).
 * @throws ConfigurationError
 */
export function checkBigNumberConfig(pool: Pool, what: string): void {
  const config = (pool as PoolConfigShape).pool?.config?.connectionConfig
  if (!config) return
  if (!config.supportBigNumbers || !config.bigNumberStrings) {
    throw new ConfigurationError(
      `${what}: the mysql2 pool must be created with supportBigNumbers: true and bigNumberStrings: true, or BIGINT IDs pass through JavaScript numbers and lose precision above 2^53. Use createMysqlPool().`,
    )
  }
}
