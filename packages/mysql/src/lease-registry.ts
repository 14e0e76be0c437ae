import {
  allWorkersHeld,
  checkIdentifier,
  type LeaseRecord,
  type LeaseRegistry,
  type LeaseRegistryOptions,
  type LeaseRequest,
  leaseLost,
  lowerWhileHeld,
  maxTtlMismatch,
  RegistrySetup,
  readRegistryOptions,
  registryBehind,
  registryCall,
  registryWaiting,
  type Sharding,
  type ShardingDescription,
  SourceUnavailableError,
  ttlAboveMax,
  type WorkerLease,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { callServer, type RunQuery } from './server-call'

/** What {@link MysqlLeaseRegistry} takes besides the pool. */
export interface MysqlLeaseRegistryOptions extends LeaseRegistryOptions {
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

const KNOWN_OPTIONS = ['database', 'reservedWorkers', 'maxTtlMs', 'timeoutMs']

/** The server's clock in ms and µs, read in the statement, so holders' clocks may disagree. */
const NOW_MS = 'CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)'
const NOW_US = 'CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000) AS SIGNED)'

/**
 * Worker leases in MySQL 8 or MariaDB 10.6+ tables, for {@link LeasedSource}: each process
 * holds one worker id at a time, renews it, and the next holder starts above the high-water mark
 * the previous one recorded. A grant is one transaction (`FOR UPDATE SKIP LOCKED`), renewals and
 * releases are single statements fenced by the worker, the token and the holder's id, and expiry
 * is read on the server's clock. Every call gives up after `timeoutMs` (its connection is then
 * closed).
 *
 * It notices on its own when it lost data, and then grants nothing for `maxTtlMs`, so that every
 * holder it forgot has stopped: its tables were replaced by a restored dump (the leases table's
 * creation time changed), or a holder renewing finds the registry behind its token. A restore that
 * keeps the tables (a physical backup, rows reloaded into the same tables) is seen only by the
 * next renewal: run `quarantine()` (`shardflake leases mysql --restored`) right after it.
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
  readonly maxTtlMs: number
  private readonly timeoutMs: number
  private readonly db: string
  /** The leases table's creation time: replaced tables (a restored dump) have another. */
  private readonly identity: string
  private readonly reserved: number[]
  private readonly setup = new RegistrySetup((sharding) => this.create(sharding))

  /**
   * @throws InvalidIdentifierError for a database name that is not a plain identifier.
   * @throws InvalidArgumentError for unknown options or values out of bounds.
   */
  constructor(
    private readonly pool: Pool,
    options: MysqlLeaseRegistryOptions = {},
  ) {
    const settings = readRegistryOptions('MysqlLeaseRegistry options', options, KNOWN_OPTIONS, [])
    this.maxTtlMs = settings.maxTtlMs
    this.timeoutMs = settings.timeoutMs
    const name = checkIdentifier('database', options.database ?? 'shardflake')
    this.db = `\`${name}\``
    this.identity = `(SELECT CAST(UNIX_TIMESTAMP(CREATE_TIME) AS CHAR) FROM information_schema.TABLES
                       WHERE TABLE_SCHEMA = '${name}' AND TABLE_NAME = 'worker_leases')`
    this.reserved = [...new Set([0, ...settings.reservedWorkers])]
  }

  async acquire(request: LeaseRequest): Promise<WorkerLease> {
    return this.grant(request, true)
  }

  private async grant(request: LeaseRequest, mayRecord: boolean): Promise<WorkerLease> {
    if (request.ttlMs > this.maxTtlMs) throw ttlAboveMax(request, this.maxTtlMs)
    await this.setup.readyFor(request.sharding)
    const db = this.db
    const outcome = await this.call(async (run) => {
      await run('START TRANSACTION', [])
      try {
        const [registry] = await run(
          `SELECT max_ttl_ms, table_created, ${this.identity} AS current_table,
                  CAST(wait_until_ms AS CHAR) AS wait_until, CAST(${NOW_MS} AS CHAR) AS now
             FROM ${db}.lease_registry WHERE only_row = 1 FOR UPDATE`,
          [],
        )
        if (!registry) return 'unrecorded' as const
        const now = Number(registry.now)
        if (Number(registry.max_ttl_ms) !== this.maxTtlMs) {
          throw maxTtlMismatch(this.what(), Number(registry.max_ttl_ms), this.maxTtlMs)
        }
        if (String(registry.table_created) !== String(registry.current_table)) {
          await run(
            `UPDATE ${db}.lease_registry
                SET table_created = ?, lost_at_ms = ${NOW_MS},
                    wait_until_ms = GREATEST(wait_until_ms, ${NOW_MS} + max_ttl_ms)`,
            [String(registry.current_table)],
          )
          const [after] = await run(
            `SELECT CAST(wait_until_ms AS CHAR) AS until FROM ${db}.lease_registry`,
            [],
          )
          await run('COMMIT', [])
          throw registryWaiting(
            this.what(),
            'was restored from a dump (its leases table is not the one it recorded)',
            new Date(Number(after!.until)),
          )
        }
        const waitUntil = Number(registry.wait_until)
        if (now < waitUntil) {
          throw registryWaiting(this.what(), 'found it may have lost data', new Date(waitUntil))
        }
        // A worker it can start on before one whose mark is late, a free one before an expired
        // one. Walking the primary key with LIMIT 1 locks one row; sorting on an expression would
        // lock every row it read.
        const startBy = Math.floor(request.startByMs)
        const conditions = [
          ['holder IS NULL AND high_water_ms <= ?', [startBy]],
          [`holder IS NOT NULL AND expires_at < ${NOW_MS} AND high_water_ms <= ?`, [startBy]],
          ['holder IS NULL', []],
          [`holder IS NOT NULL AND expires_at < ${NOW_MS}`, []],
        ] as const
        let candidate: Record<string, unknown> | undefined
        for (const [condition, params] of conditions) {
          ;[candidate] = await run(
            `SELECT worker, CAST(high_water_ms AS CHAR) AS high_water FROM ${db}.worker_leases
              WHERE worker < ? AND worker NOT IN (?) AND ${condition}
              ORDER BY worker LIMIT 1 FOR UPDATE SKIP LOCKED`,
            [request.sharding.layout.workerCount, this.reserved, ...params],
          )
          if (candidate) break
        }
        if (!candidate) throw allWorkersHeld(request, this.reserved.join(', '))
        // Never granted twice: at least the server's clock in microseconds, whatever it forgot.
        await run(`UPDATE ${db}.lease_registry SET token = GREATEST(token + 1, ${NOW_US})`, [])
        const [token] = await run(
          `SELECT CAST(token AS CHAR) AS token FROM ${db}.lease_registry`,
          [],
        )
        const startAfterMs = Math.max(Number(candidate.high_water), waitUntil)
        await run(
          `UPDATE ${db}.worker_leases
              SET holder = ?, holder_id = ?, token = ?, ttl_ms = ?, expires_at = ${NOW_MS} + ?,
                  start_after_ms = ?, high_water_ms = GREATEST(?, ?)
            WHERE worker = ?`,
          [
            request.holder,
            request.holderId,
            String(token!.token),
            request.ttlMs,
            request.ttlMs,
            startAfterMs,
            startAfterMs,
            Math.ceil(request.highWaterMs),
            candidate.worker,
          ],
        )
        await run('COMMIT', [])
        return {
          worker: Number(candidate.worker),
          token: BigInt(String(token!.token)),
          holder: request.holder,
          holderId: request.holderId,
          startAfterMs,
          ttlMs: request.ttlMs,
          grantedAtMs: now,
        }
      } catch (error) {
        await run('ROLLBACK', []).catch(() => undefined)
        throw error
      }
    })
    if (outcome !== 'unrecorded' || !mayRecord) {
      if (outcome !== 'unrecorded') return outcome
      throw new SourceUnavailableError(
        `${this.what()} lost its record while this process asked for a lease. Retry.`,
      )
    }
    // Its record was deleted: record it again (waiting, as its leases may be live) and retry.
    await this.create(request.sharding)
    return this.grant(request, false)
  }

  async renew(lease: WorkerLease, highWaterMs: number): Promise<void> {
    const db = this.db
    const renewed = await this.call((run) =>
      run(
        `UPDATE ${db}.worker_leases
            SET expires_at = ${NOW_MS} + ?, high_water_ms = GREATEST(high_water_ms, ?)
          WHERE worker = ? AND token = ? AND holder_id = ? AND holder IS NOT NULL`,
        [lease.ttlMs, Math.ceil(highWaterMs), lease.worker, lease.token.toString(), lease.holderId],
      ),
    )
    if (affectedRows(renewed) > 0) return
    // Superseded, or the registry went back to before this grant (a restored copy): the worker's
    // token and the registry's counter are then below this lease's token. A loss found after
    // this grant already started a wait that covers it.
    const behind = `(token < ? OR COALESCE((SELECT token FROM ${db}.worker_leases WHERE worker = ?), 0) < ?)`
    const params = [lease.token.toString(), lease.worker, lease.token.toString()]
    const [found] = await this.call(async (run) => {
      await run(
        `UPDATE ${db}.lease_registry
            SET lost_at_ms = ${NOW_MS}, wait_until_ms = GREATEST(wait_until_ms, ${NOW_MS} + max_ttl_ms)
          WHERE ${behind} AND lost_at_ms < ?`,
        [...params, lease.grantedAtMs],
      )
      return run(
        `SELECT CAST(wait_until_ms AS CHAR) AS until FROM ${db}.lease_registry WHERE ${behind}`,
        params,
      )
    })
    if (found) throw registryBehind(lease, new Date(Number(found.until)))
    throw leaseLost(lease)
  }

  async release(lease: WorkerLease, issuedMs: number): Promise<void> {
    await this.call((run) =>
      run(
        `UPDATE ${this.db}.worker_leases
            SET holder = NULL, holder_id = NULL, expires_at = NULL,
                high_water_ms = GREATEST(?, start_after_ms)
          WHERE worker = ? AND token = ? AND holder_id = ? AND holder IS NOT NULL`,
        [
          Number.isFinite(issuedMs) ? Math.max(0, Math.ceil(issuedMs)) : 0,
          lease.worker,
          lease.token.toString(),
          lease.holderId,
        ],
      ),
    )
  }

  async list(): Promise<LeaseRecord[]> {
    const rows = await this.call(async (run) => {
      if (!(await this.exists(run))) return [] // no holder has used this registry
      return run(
        `SELECT worker, holder, CAST(token AS CHAR) AS token, expires_at, high_water_ms
           FROM ${this.db}.worker_leases ORDER BY worker`,
        [],
      )
    })
    return rows.map((row) => ({
      worker: Number(row.worker),
      holder: (row.holder as string | null) ?? null,
      token: BigInt(String(row.token)),
      expiresAt: row.expires_at === null ? null : new Date(Number(row.expires_at)),
      highWaterMs: Number(row.high_water_ms),
    }))
  }

  async free(worker: number): Promise<void> {
    await this.call((run) =>
      run(
        `UPDATE ${this.db}.worker_leases SET holder = NULL, holder_id = NULL, expires_at = NULL
          WHERE worker = ?`,
        [worker],
      ),
    )
  }

  async quarantine(): Promise<Date | null> {
    const [row] = await this.call(async (run) => {
      if (!(await this.exists(run, 'lease_registry'))) return []
      await run(
        `UPDATE ${this.db}.lease_registry
            SET lost_at_ms = ${NOW_MS}, wait_until_ms = GREATEST(wait_until_ms, ${NOW_MS} + max_ttl_ms),
                table_created = COALESCE(${this.identity}, table_created)`,
        [],
      )
      return run(`SELECT CAST(wait_until_ms AS CHAR) AS until FROM ${this.db}.lease_registry`, [])
    })
    return row ? new Date(Number(row.until)) : null
  }

  async recordMaxTtl(): Promise<void> {
    const db = this.db
    const outcome = await this.call(async (run) => {
      if (!(await this.exists(run, 'lease_registry'))) return 'unrecorded'
      const changed = await run(
        `UPDATE ${db}.lease_registry SET max_ttl_ms = ?
          WHERE ? >= max_ttl_ms OR NOT EXISTS (
            SELECT 1 FROM ${db}.worker_leases
             WHERE holder IS NOT NULL AND expires_at > ${NOW_MS} AND ttl_ms > ?)`,
        [this.maxTtlMs, this.maxTtlMs, this.maxTtlMs],
      )
      if (affectedRows(changed) > 0) return 'recorded'
      const recorded = await run(`SELECT 1 FROM ${db}.lease_registry`, [])
      return recorded.length > 0 ? 'refused' : 'unrecorded'
    })
    if (outcome === 'refused') throw lowerWhileHeld(this.what(), this.maxTtlMs)
  }

  /** The registry does not own the pool: end it yourself. */
  async close(): Promise<void> {}

  private what(): string {
    return `The lease registry in database ${this.db}`
  }

  private async exists(run: RunQuery, table = 'worker_leases'): Promise<boolean> {
    const tables = await run(
      'SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
      [this.db.slice(1, -1), table],
    )
    return tables.length > 0
  }

  private async create(sharding: Sharding): Promise<void> {
    const db = this.db
    await this.call(async (run) => {
      await run(`CREATE DATABASE IF NOT EXISTS ${db}`, [])
      await run(
        `CREATE TABLE IF NOT EXISTS ${db}.worker_leases (
           worker INT NOT NULL PRIMARY KEY,
           holder VARCHAR(255) NULL,
           holder_id VARCHAR(64) NULL,
           token BIGINT NOT NULL DEFAULT 0,
           expires_at BIGINT NULL,
           ttl_ms INT NULL,
           high_water_ms BIGINT NOT NULL DEFAULT 0,
           start_after_ms BIGINT NOT NULL DEFAULT 0
         ) ENGINE = InnoDB`,
        [],
      )
      await run(
        `CREATE TABLE IF NOT EXISTS ${db}.lease_registry (
           only_row TINYINT NOT NULL PRIMARY KEY DEFAULT 1,
           description TEXT NOT NULL,
           max_ttl_ms INT NOT NULL,
           token BIGINT NOT NULL DEFAULT 0,
           table_created VARCHAR(32) NOT NULL,
           lost_at_ms BIGINT NOT NULL DEFAULT 0,
           wait_until_ms BIGINT NOT NULL DEFAULT 0
         ) ENGINE = InnoDB`,
        [],
      )
      // New tables: nothing to wait for. Leases without a record: it lost the record, and maybe
      // holders with it, so it waits.
      await run(
        `INSERT IGNORE INTO ${db}.lease_registry
           (only_row, description, max_ttl_ms, table_created, lost_at_ms, wait_until_ms)
         SELECT 1, ?, ?, ${this.identity}, IF(leased, now, 0), IF(leased, now + ?, 0)
           FROM (SELECT EXISTS (SELECT 1 FROM ${db}.worker_leases WHERE token > 0) AS leased,
                        ${NOW_MS} AS now) AS found`,
        [JSON.stringify(sharding.toJSON()), this.maxTtlMs, this.maxTtlMs],
      )
      const [recorded] = await run(`SELECT description FROM ${db}.lease_registry`, [])
      sharding.checkSame(
        JSON.parse(String(recorded!.description)) as ShardingDescription,
        `The lease registry in database ${db}`,
      )
      const workers = Array.from({ length: sharding.layout.workerCount }, (_, worker) => [worker])
      await run(`INSERT IGNORE INTO ${db}.worker_leases (worker) VALUES ?`, [workers])
    })
  }

  /**
   * Runs `work` on one connection of the pool within `timeoutMs`; on give-up that connection is
   * closed (a transaction on it is rolled back by the server), never handed back to the pool.
   */
  private call<T>(work: (run: RunQuery) => Promise<T>): Promise<T> {
    return registryCall(() =>
      callServer(
        { pool: this.pool, timeoutMs: this.timeoutMs, what: this.what(), giveUp: 'destroy' },
        work,
      ),
    )
  }
}

/** The rows an UPDATE matched, from mysql2's result header. */
function affectedRows(result: unknown): number {
  if (typeof result === 'object' && result !== null && 'affectedRows' in result) {
    return Number(result.affectedRows)
  }
  return 0
}
