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
  ShardflakeError,
  type Sharding,
  type ShardingDescription,
  SourceUnavailableError,
  ttlAboveMax,
  type WorkerLease,
  withDeadline,
} from '@shardflake/core'
import { isPool, type PooledConnection, type SqlClient, watchNewConnections } from './client'

/** What {@link PostgresLeaseRegistry} takes besides the client. */
export interface PostgresLeaseRegistryOptions extends LeaseRegistryOptions {
  /**
   * The schema of the lease tables (created on first use: `worker_leases` and `lease_registry`).
   * @default 'shardflake'
   */
  readonly schema?: string
  /**
   * Workers never leased: those database functions write into their IDs. The workers of the
   * shards installed in this database (`installPostgres` records them in the same schema) are
   * added to these on every grant, so a leased process and a database function never share one.
   * @default [0]
   */
  readonly reservedWorkers?: readonly number[]
}

const KNOWN_OPTIONS = ['schema', 'reservedWorkers', 'maxTtlMs', 'timeoutMs']

/** The server's clock, read when the statement runs. */
const NOW_MS = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`
const NOW_US = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`
/** The WAL timeline the server writes on: it changes after a point-in-time recovery or a promotion. */
const TIMELINE = `('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::integer`

type Query = (text: string, params?: unknown[]) => Promise<Record<string, unknown>[]>

/**
 * Worker leases in a PostgreSQL table, for {@link LeasedSource}: each process holds one worker
 * id at a time, renews it, and the next holder starts above the high-water mark the previous one
 * recorded. A grant is one transaction; renewals and releases are single statements fenced by the
 * worker, the token and the holder's id; expiry is decided on the server's clock, so holders'
 * clocks may disagree. Every call gives up after `timeoutMs` (its connection is then dropped).
 *
 * It notices on its own when it lost data, and then grants nothing for `maxTtlMs`, so that every
 * holder it forgot has stopped: its tables were replaced by a restored copy (another table oid),
 * the server moved to a new WAL timeline (a point-in-time recovery, a promoted standby), or a
 * holder renewing finds the registry behind its token. A restore of the rows into the same tables
 * on the same timeline is seen only by the next renewal: run `quarantine()` (`shardflake leases
 * postgres --restored`) right after such a restore.
 *
 * @example
 * ```ts
 * import pg from 'pg'
 * import { LeasedSource, type Sharding } from '@shardflake/core'
 * import { PostgresLeaseRegistry } from '@shardflake/postgres'
 * declare const sharding: Sharding // a layout with worker bits
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
 * const source = await LeasedSource.start({ sharding, registry: new PostgresLeaseRegistry(pool) })
 * ```
 */
export class PostgresLeaseRegistry implements LeaseRegistry {
  readonly maxTtlMs: number
  private readonly timeoutMs: number
  private readonly schema: string
  private readonly reserved: number[]
  private readonly setup = new RegistrySetup((sharding) => this.create(sharding))
  /** Whether this server tells its WAL timeline (a standby or an embedded PostgreSQL may not). */
  private timeline: Promise<string> | undefined

  /**
   * @throws InvalidIdentifierError for a schema name that is not a plain identifier.
   * @throws InvalidArgumentError for unknown options or values out of bounds.
   */
  constructor(
    private readonly client: SqlClient,
    options: PostgresLeaseRegistryOptions = {},
  ) {
    const settings = readRegistryOptions(
      'PostgresLeaseRegistry options',
      options,
      KNOWN_OPTIONS,
      [0],
    )
    this.maxTtlMs = settings.maxTtlMs
    this.timeoutMs = settings.timeoutMs
    this.reserved = [...settings.reservedWorkers]
    this.schema = `"${checkIdentifier('schema', options.schema ?? 'shardflake')}"`
  }

  async acquire(request: LeaseRequest): Promise<WorkerLease> {
    return this.grant(request, true)
  }

  private async grant(request: LeaseRequest, mayRecord: boolean): Promise<WorkerLease> {
    if (request.ttlMs > this.maxTtlMs) throw ttlAboveMax(request, this.maxTtlMs)
    await this.setup.readyFor(request.sharding)
    const timeline = await this.timelineExpression()
    const s = this.schema
    const outcome = await this.call(async (query) => {
      await query('BEGIN')
      try {
        const [registry] = await query(
          `SELECT r.max_ttl_ms, r.table_oid::text AS table_oid, r.timeline, r.wait_until_ms::text AS wait_until,
                  '${s}.worker_leases'::regclass::oid::bigint::text AS current_oid, ${timeline} AS current_timeline,
                  to_regclass('${s}.shards') IS NOT NULL AS installed, ${NOW_MS}::text AS now
             FROM ${s}.lease_registry r FOR UPDATE`,
        )
        if (!registry) return 'unrecorded' as const
        const now = Number(registry.now)
        if (Number(registry.max_ttl_ms) !== this.maxTtlMs) {
          throw maxTtlMismatch(this.what(), Number(registry.max_ttl_ms), this.maxTtlMs)
        }
        const replaced = registry.table_oid !== registry.current_oid
        const newTimeline =
          registry.timeline !== null &&
          registry.current_timeline !== null &&
          registry.timeline !== registry.current_timeline
        if (replaced || newTimeline) {
          const [row] = await query(
            `UPDATE ${s}.lease_registry
                SET table_oid = $1, timeline = $2, lost_at_ms = ${NOW_MS},
                    wait_until_ms = GREATEST(wait_until_ms, ${NOW_MS} + max_ttl_ms)
             RETURNING wait_until_ms::text AS until`,
            [registry.current_oid, registry.current_timeline],
          )
          await query('COMMIT')
          throw registryWaiting(
            this.what(),
            replaced
              ? 'was restored from a copy (its table is not the one it recorded)'
              : `moved to WAL timeline ${registry.current_timeline} (a point-in-time recovery or a promoted standby)`,
            new Date(Number(row!.until)),
          )
        }
        const waitUntil = Number(registry.wait_until)
        if (now < waitUntil) {
          throw registryWaiting(this.what(), 'found it may have lost data', new Date(waitUntil))
        }
        const [candidate] = await query(
          `SELECT worker, high_water_ms::text AS high_water FROM ${s}.worker_leases
            WHERE worker < $1 AND worker <> ALL($2::integer[])
              ${registry.installed ? `AND worker NOT IN (SELECT worker FROM ${s}.shards)` : ''}
              AND (holder IS NULL OR expires_at < clock_timestamp())
            ORDER BY high_water_ms > $3, holder IS NOT NULL, worker
            LIMIT 1 FOR UPDATE SKIP LOCKED`,
          [request.sharding.layout.workerCount, this.reserved, Math.floor(request.startByMs)],
        )
        if (!candidate) {
          throw allWorkersHeld(
            request,
            `${this.reserved.join(', ')} and the workers of shards installed here`,
          )
        }
        // Never granted twice: at least the server's clock in microseconds, whatever it forgot.
        const [token] = await query(
          `UPDATE ${s}.lease_registry SET token = GREATEST(token + 1, ${NOW_US})
           RETURNING token::text AS token`,
        )
        const startAfterMs = Math.max(Number(candidate.high_water), waitUntil)
        await query(
          `UPDATE ${s}.worker_leases
              SET holder = $1, holder_id = $2, token = $3, ttl_ms = $4::integer,
                  expires_at = clock_timestamp() + $4::integer * interval '1 millisecond',
                  start_after_ms = $5::bigint, high_water_ms = GREATEST($5::bigint, $6::bigint)
            WHERE worker = $7`,
          [
            request.holder,
            request.holderId,
            token!.token,
            request.ttlMs,
            startAfterMs,
            Math.ceil(request.highWaterMs),
            candidate.worker,
          ],
        )
        await query('COMMIT')
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
        await query('ROLLBACK').catch(() => undefined)
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
    const s = this.schema
    const renewed = await this.call((query) =>
      query(
        `UPDATE ${s}.worker_leases
            SET expires_at = clock_timestamp() + $4 * interval '1 millisecond',
                high_water_ms = GREATEST(high_water_ms, $5)
          WHERE worker = $1 AND token = $2 AND holder_id = $3 AND holder IS NOT NULL
         RETURNING worker`,
        [lease.worker, lease.token.toString(), lease.holderId, lease.ttlMs, Math.ceil(highWaterMs)],
      ),
    )
    if (renewed.length > 0) return
    // Superseded, or the registry went back to before this grant (a restored copy): the worker's
    // token and the registry's counter are then below this lease's token.
    const [behind] = await this.call((query) =>
      query(
        `UPDATE ${s}.lease_registry
            SET lost_at_ms = ${NOW_MS}, wait_until_ms = GREATEST(wait_until_ms, ${NOW_MS} + max_ttl_ms)
          WHERE (token < $2 OR coalesce((SELECT token FROM ${s}.worker_leases WHERE worker = $1), 0) < $2)
            AND lost_at_ms < $3
         RETURNING wait_until_ms::text AS until`,
        [lease.worker, lease.token.toString(), lease.grantedAtMs],
      ),
    )
    if (behind) throw registryBehind(lease, new Date(Number(behind.until)))
    const [known] = await this.call((query) =>
      query(
        `SELECT r.wait_until_ms::text AS until FROM ${s}.lease_registry r
          WHERE r.token < $2 OR coalesce((SELECT token FROM ${s}.worker_leases WHERE worker = $1), 0) < $2`,
        [lease.worker, lease.token.toString()],
      ),
    )
    // Behind, with a loss already found after this grant: its wait covers this lease.
    if (known) throw registryBehind(lease, new Date(Number(known.until)))
    throw leaseLost(lease)
  }

  async release(lease: WorkerLease, issuedMs: number): Promise<void> {
    await this.call((query) =>
      query(
        `UPDATE ${this.schema}.worker_leases
            SET holder = NULL, holder_id = NULL, expires_at = NULL,
                high_water_ms = GREATEST($4::bigint, start_after_ms)
          WHERE worker = $1 AND token = $2 AND holder_id = $3 AND holder IS NOT NULL`,
        [
          lease.worker,
          lease.token.toString(),
          lease.holderId,
          Number.isFinite(issuedMs) ? Math.max(0, Math.ceil(issuedMs)) : 0,
        ],
      ),
    )
  }

  async list(): Promise<LeaseRecord[]> {
    const rows = await this.call(async (query) => {
      const [exists] = await query(
        `SELECT to_regclass('${this.schema}.worker_leases') IS NOT NULL AS yes`,
      )
      if (!exists?.yes) return [] // no holder has used this registry
      return query(
        `SELECT worker, holder, token::text AS token, expires_at, high_water_ms::text AS high_water_ms
           FROM ${this.schema}.worker_leases ORDER BY worker`,
      )
    })
    return rows.map((row) => ({
      worker: Number(row.worker),
      holder: (row.holder as string | null) ?? null,
      token: BigInt(String(row.token)),
      expiresAt: (row.expires_at as Date | null) ?? null,
      highWaterMs: Number(row.high_water_ms),
    }))
  }

  async free(worker: number): Promise<void> {
    await this.call((query) =>
      query(
        `UPDATE ${this.schema}.worker_leases SET holder = NULL, holder_id = NULL, expires_at = NULL
          WHERE worker = $1`,
        [worker],
      ),
    )
  }

  async quarantine(): Promise<Date | null> {
    const timeline = await this.timelineExpression()
    const s = this.schema
    const [row] = await this.call(async (query) => {
      const [exists] = await query(`SELECT to_regclass('${s}.lease_registry') IS NOT NULL AS yes`)
      if (!exists?.yes) return []
      return query(
        `UPDATE ${s}.lease_registry
            SET lost_at_ms = ${NOW_MS}, wait_until_ms = GREATEST(wait_until_ms, ${NOW_MS} + max_ttl_ms),
                table_oid = '${s}.worker_leases'::regclass::oid::bigint, timeline = ${timeline}
         RETURNING wait_until_ms::text AS until`,
      )
    })
    return row ? new Date(Number(row.until)) : null
  }

  /**
   * Records this object's `maxTtlMs` as the registry's: every process must then use it. Raising
   * it is always safe; lowering it is refused while a live lease has a longer TTL.
   * @throws ConfigurationError
   */
  /**
   * Records this object's `maxTtlMs` as the registry's: every process must then use it. Raising
   * it is always safe; lowering it is refused while a live lease has a longer TTL. A registry
   * without a record yet records it at its first grant.
   * @throws ConfigurationError
   */
  async recordMaxTtl(): Promise<void> {
    const s = this.schema
    const outcome = await this.call(async (query) => {
      const [exists] = await query(`SELECT to_regclass('${s}.lease_registry') IS NOT NULL AS yes`)
      if (!exists?.yes) return 'unrecorded'
      const [row] = await query(
        `UPDATE ${s}.lease_registry SET max_ttl_ms = $1
          WHERE $1 >= max_ttl_ms OR NOT EXISTS (
            SELECT 1 FROM ${s}.worker_leases
             WHERE holder IS NOT NULL AND expires_at > clock_timestamp() AND ttl_ms > $1)
         RETURNING max_ttl_ms`,
        [this.maxTtlMs],
      )
      if (row) return 'recorded'
      const [recorded] = await query(`SELECT 1 FROM ${s}.lease_registry`)
      return recorded ? 'refused' : 'unrecorded'
    })
    if (outcome === 'refused') throw lowerWhileHeld(this.what(), this.maxTtlMs)
  }

  /** The registry does not own the client: end your pool yourself. */
  async close(): Promise<void> {}

  private what(): string {
    return `The lease registry in schema ${this.schema}`
  }

  /**
   * The timeline expression when the server tells it, else NULL (a standby, an embedded
   * PostgreSQL). A server that could not be asked is asked again next time.
   */
  private timelineExpression(): Promise<string> {
    this.timeline ??= this.call((query) => query(`SELECT ${TIMELINE} AS timeline`)).then(
      () => TIMELINE,
      (error: unknown) => {
        const code = (error as { cause?: { code?: unknown } }).cause?.code
        if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !/^(08|57)/.test(code)) {
          return 'NULL::integer'
        }
        this.timeline = undefined
        throw error
      },
    )
    return this.timeline
  }

  private async create(sharding: Sharding): Promise<void> {
    const s = this.schema
    const timeline = await this.timelineExpression()
    await this.call(async (query) => {
      await query(`CREATE SCHEMA IF NOT EXISTS ${s}`)
      await query(
        `CREATE TABLE IF NOT EXISTS ${s}.worker_leases (
           worker integer PRIMARY KEY CHECK (worker >= 0),
           holder text,
           holder_id text,
           token bigint NOT NULL DEFAULT 0,
           expires_at timestamptz,
           ttl_ms integer,
           high_water_ms bigint NOT NULL DEFAULT 0,
           start_after_ms bigint NOT NULL DEFAULT 0)`,
      )
      await query(
        `CREATE TABLE IF NOT EXISTS ${s}.lease_registry (
           only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
           description jsonb NOT NULL,
           max_ttl_ms integer NOT NULL,
           token bigint NOT NULL DEFAULT 0,
           table_oid bigint NOT NULL,
           timeline integer,
           lost_at_ms bigint NOT NULL DEFAULT 0,
           wait_until_ms bigint NOT NULL DEFAULT 0)`,
      )
      // New tables: nothing to wait for. Leases without a record: it lost the record, and maybe
      // holders with it, so it waits.
      await query(
        `INSERT INTO ${s}.lease_registry (description, max_ttl_ms, table_oid, timeline, lost_at_ms, wait_until_ms)
         SELECT $1::jsonb, $2::integer, '${s}.worker_leases'::regclass::oid::bigint, ${timeline},
                CASE WHEN leased THEN now ELSE 0 END, CASE WHEN leased THEN now + $2::integer ELSE 0 END
           FROM (SELECT EXISTS (SELECT 1 FROM ${s}.worker_leases WHERE token > 0) AS leased,
                        ${NOW_MS} AS now) AS found
         ON CONFLICT DO NOTHING`,
        [JSON.stringify(sharding.toJSON()), this.maxTtlMs],
      )
      const [recorded] = await query(`SELECT description FROM ${s}.lease_registry`)
      sharding.checkSame(
        recorded!.description as ShardingDescription,
        `The lease registry in schema ${s}`,
      )
      await query(
        `INSERT INTO ${s}.worker_leases (worker)
         SELECT generate_series(0, $1 - 1) ON CONFLICT DO NOTHING`,
        [sharding.layout.workerCount],
      )
    })
  }

  /**
   * Runs `work` on one connection within `timeoutMs`. On give-up the connection is dropped (a
   * transaction on it is rolled back by the server), never handed to the next caller.
   */
  private call<T>(work: (query: Query) => Promise<T>): Promise<T> {
    const client = this.client
    let lent: PooledConnection | undefined
    let gaveUp = false
    const drop = () => {
      const connection = lent
      lent = undefined
      connection?.release(new Error('The lease registry call was given up.'))
    }
    const task = async () => {
      let target: SqlClient = client
      if (isPool(client)) {
        watchNewConnections(client)
        const connection = await client.connect()
        if (gaveUp) {
          connection.release(true)
          throw new Error('The lease registry call was given up.')
        }
        lent = connection
        target = connection
      }
      try {
        return await work(async (text, params) => {
          if (gaveUp) throw new Error('The lease registry call was given up.')
          return (await target.query(text, params ?? [])).rows as Record<string, unknown>[]
        })
      } catch (error) {
        // A connection whose statement failed is not handed to the next caller; one that only
        // carried a refusal of this registry (rolled back) is.
        if (!(error instanceof ShardflakeError)) drop()
        throw error
      } finally {
        const connection = lent
        lent = undefined
        connection?.release()
      }
    }
    return registryCall(() =>
      withDeadline(task, {
        timeoutMs: this.timeoutMs,
        what: this.what(),
        onGiveUp: () => {
          gaveUp = true
          drop()
        },
      }),
    )
  }
}
