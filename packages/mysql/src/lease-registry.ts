import {
  allWorkersHeld,
  checkIdentifier,
  type LeaseRecord,
  type LeaseRegistry,
  type LeaseRequest,
  leaseLost,
  RegistrySetup,
  registryCall,
  type Sharding,
  type ShardingDescription,
  type WorkerLease,
} from '@shardflake/core'
import type { Pool, PoolConnection, RowDataPacket } from 'mysql2/promise'

/** What {@link MysqlLeaseRegistry} takes besides the pool. */
export interface MysqlLeaseRegistryOptions {
  /** The database of the lease tables (created on first use). @default 'shardflake' */
  readonly database?: string
  /**
   * Workers never leased besides worker 0, which the MySQL routines write into every ID they make
   * and which this registry therefore never leases: add those of other database functions or of
   * Redis servers.
   * @default []
   */
  readonly reservedWorkers?: readonly number[]
}

/** The server's clock in ms, read in the statement, so holders' clocks may disagree. */
const NOW_MS = 'CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)'

/**
 * Worker leases in MySQL 8 or MariaDB 10.6+ tables, for {@link LeasedSource}: each process
 * holds one worker id at a time, renews it, and the next holder starts above the high-water mark
 * the previous one recorded. A grant is one transaction (`FOR UPDATE SKIP LOCKED`), renewals and
 * releases are single statements fenced by the token, and expiry is read on the server's clock.
 *
 * @example
 * ```ts
 * import mysql from 'mysql2/promise'
 * import { LeasedSource, type Sharding } from '@shardflake/core'
 * import { MysqlLeaseRegistry } from '@shardflake/mysql'
 * declare const sharding: Sharding // a layout with worker bits
 *
 * const pool = mysql.createPool(process.env.MYSQL_URL!)
 * const source = await LeasedSource.start({ sharding, registry: new MysqlLeaseRegistry(pool) })
 * ```
 */
export class MysqlLeaseRegistry implements LeaseRegistry {
  private readonly db: string
  private readonly reserved: number[]
  private readonly setup = new RegistrySetup((sharding) => this.create(sharding))

  /** @throws InvalidIdentifierError for a database name that is not a plain identifier. */
  constructor(
    private readonly pool: Pool,
    options: MysqlLeaseRegistryOptions = {},
  ) {
    this.db = `\`${checkIdentifier('database', options.database ?? 'shardflake')}\``
    this.reserved = [...new Set([0, ...(options.reservedWorkers ?? [])])]
  }

  async acquire(request: LeaseRequest): Promise<WorkerLease> {
    await this.setup.readyFor(request.sharding)
    return this.transaction(async (connection) => {
      const reserved = this.reserved.length > 0 ? this.reserved : [-1]
      // A free worker first, else an expired one. Walking the primary key with LIMIT 1 locks one
      // row; sorting on an expression would lock every row it read and starve concurrent grants.
      const pick = async (condition: string) => {
        const [rows] = await connection.query<RowDataPacket[]>(
          `SELECT worker, high_water_ms FROM ${this.db}.worker_leases
            WHERE worker < ? AND worker NOT IN (?) AND ${condition}
            ORDER BY worker LIMIT 1 FOR UPDATE SKIP LOCKED`,
          [request.sharding.layout.workerCount, reserved],
        )
        return rows
      }
      let candidates = await pick('holder IS NULL')
      if (candidates.length === 0) candidates = await pick(`expires_at < ${NOW_MS}`)
      const candidate = candidates[0] as
        | { worker: number; high_water_ms: number | string }
        | undefined
      if (!candidate) {
        throw allWorkersHeld(request, this.reserved.join(', '))
      }
      await connection.query(`UPDATE ${this.db}.lease_tokens SET token = LAST_INSERT_ID(token + 1)`)
      const [[tokenRow]] = await connection.query<RowDataPacket[]>(
        'SELECT CAST(LAST_INSERT_ID() AS CHAR) AS token',
      )
      const token = String((tokenRow as { token: string }).token)
      await connection.query(
        `UPDATE ${this.db}.worker_leases
            SET holder = ?, token = ?, expires_at = ${NOW_MS} + ?,
                high_water_ms = GREATEST(high_water_ms, ?)
          WHERE worker = ?`,
        [request.holder, token, request.ttlMs, Math.ceil(request.highWaterMs), candidate.worker],
      )
      return {
        worker: candidate.worker,
        token: BigInt(token),
        holder: request.holder,
        startAfterMs: Number(candidate.high_water_ms),
        ttlMs: request.ttlMs,
      }
    })
  }

  async renew(lease: WorkerLease, highWaterMs: number): Promise<void> {
    const [result] = await registryCall(() =>
      this.pool.query(
        `UPDATE ${this.db}.worker_leases
            SET expires_at = ${NOW_MS} + ?, high_water_ms = GREATEST(high_water_ms, ?)
          WHERE worker = ? AND token = ? AND holder IS NOT NULL`,
        [lease.ttlMs, Math.ceil(highWaterMs), lease.worker, lease.token.toString()],
      ),
    )
    if ((result as { affectedRows: number }).affectedRows === 0) {
      throw leaseLost(lease)
    }
  }

  async release(lease: WorkerLease, issuedMs: number): Promise<void> {
    await registryCall(() =>
      this.pool.query(
        `UPDATE ${this.db}.worker_leases SET holder = NULL, expires_at = NULL, high_water_ms = ?
          WHERE worker = ? AND token = ? AND holder IS NOT NULL`,
        [
          Number.isFinite(issuedMs) ? Math.max(0, Math.ceil(issuedMs)) : 0,
          lease.worker,
          lease.token.toString(),
        ],
      ),
    )
  }

  async list(): Promise<LeaseRecord[]> {
    const [tables] = await registryCall(() =>
      this.pool.query<RowDataPacket[]>(
        `SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'worker_leases'`,
        [this.db.slice(1, -1)],
      ),
    )
    if (tables.length === 0) return [] // no holder has used this registry
    const [rows] = await registryCall(() =>
      this.pool.query<RowDataPacket[]>(
        `SELECT worker, holder, CAST(token AS CHAR) AS token, expires_at, high_water_ms
           FROM ${this.db}.worker_leases ORDER BY worker`,
      ),
    )
    return rows.map((row) => ({
      worker: Number(row.worker),
      holder: (row.holder as string | null) ?? null,
      token: BigInt(row.token as string),
      expiresAt: row.expires_at === null ? null : new Date(Number(row.expires_at)),
      highWaterMs: Number(row.high_water_ms),
    }))
  }

  async free(worker: number): Promise<void> {
    await registryCall(() =>
      this.pool.query(
        `UPDATE ${this.db}.worker_leases SET holder = NULL, expires_at = NULL WHERE worker = ?`,
        [worker],
      ),
    )
  }

  /** The registry does not own the pool: end it yourself. */
  async close(): Promise<void> {}

  private async create(sharding: Sharding): Promise<void> {
    const db = this.db
    const query = (sql: string, params?: unknown[]) =>
      registryCall(() => this.pool.query(sql, params))
    await query(`CREATE DATABASE IF NOT EXISTS ${db}`)
    await query(
      `CREATE TABLE IF NOT EXISTS ${db}.worker_leases (
         worker INT NOT NULL PRIMARY KEY,
         holder VARCHAR(255) NULL,
         token BIGINT NOT NULL DEFAULT 0,
         expires_at BIGINT NULL,
         high_water_ms BIGINT NOT NULL DEFAULT 0
       ) ENGINE = InnoDB`,
    )
    await query(
      `CREATE TABLE IF NOT EXISTS ${db}.lease_tokens (token BIGINT NOT NULL) ENGINE = InnoDB`,
    )
    await query(
      `INSERT INTO ${db}.lease_tokens (token)
       SELECT 0 FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM ${db}.lease_tokens)`,
    )
    await query(
      `CREATE TABLE IF NOT EXISTS ${db}.lease_sharding (
         only_row TINYINT NOT NULL PRIMARY KEY DEFAULT 1, description TEXT NOT NULL
       ) ENGINE = InnoDB`,
    )
    await query(`INSERT IGNORE INTO ${db}.lease_sharding (only_row, description) VALUES (1, ?)`, [
      JSON.stringify(sharding.toJSON()),
    ])
    const [rows] = await registryCall(() =>
      this.pool.query<RowDataPacket[]>(`SELECT description FROM ${db}.lease_sharding`),
    )
    const recorded = JSON.parse(String(rows[0]!.description)) as ShardingDescription
    sharding.checkSame(recorded, `The lease registry in database ${db}`)
    const workers = Array.from({ length: sharding.layout.workerCount }, (_, worker) => [worker])
    await query(`INSERT IGNORE INTO ${db}.worker_leases (worker) VALUES ?`, [workers])
  }

  private async transaction<T>(work: (connection: PoolConnection) => Promise<T>): Promise<T> {
    const connection = await registryCall(() => this.pool.getConnection())
    try {
      await registryCall(() => connection.beginTransaction())
      const result = await registryCall(() => work(connection))
      await registryCall(() => connection.commit())
      return result
    } catch (error) {
      await connection.rollback().catch(() => undefined)
      throw error
    } finally {
      connection.release()
    }
  }
}
