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
import type { SqlClient } from './client'

/** What {@link PostgresLeaseRegistry} takes besides the client. */
export interface PostgresLeaseRegistryOptions {
  /**
   * The schema of the lease tables (created on first use, with `worker_leases`, `lease_tokens`
   * and `lease_sharding`).
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

/**
 * Worker leases in a PostgreSQL table, for {@link LeasedSource}: each process holds one worker
 * id at a time, renews it, and the next holder starts above the high-water mark the previous one
 * recorded. Grants, renewals and releases are single statements (`FOR UPDATE SKIP LOCKED`), and
 * expiry is decided on the server's clock, so holders' clocks may disagree.
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
  private readonly schema: string
  private readonly reserved: number[]
  private readonly setup = new RegistrySetup((sharding) => this.create(sharding))

  /** @throws InvalidIdentifierError for a schema name that is not a plain identifier. */
  constructor(
    private readonly client: SqlClient,
    options: PostgresLeaseRegistryOptions = {},
  ) {
    this.schema = `"${checkIdentifier('schema', options.schema ?? 'shardflake')}"`
    this.reserved = [...(options.reservedWorkers ?? [0])]
  }

  async acquire(request: LeaseRequest): Promise<WorkerLease> {
    await this.setup.readyFor(request.sharding)
    const installed = await this.run(
      `SELECT to_regclass('${this.schema}.shards') IS NOT NULL AS yes`,
    )
    const databaseWorkers = (installed.rows[0] as { yes: boolean }).yes
      ? `AND worker NOT IN (SELECT worker FROM ${this.schema}.shards)`
      : ''
    const { rows } = await this.run(
      `WITH candidate AS (
         SELECT worker, high_water_ms FROM ${this.schema}.worker_leases
          WHERE worker < $4 AND worker <> ALL($5::integer[]) ${databaseWorkers}
            AND (holder IS NULL OR expires_at < clock_timestamp())
          ORDER BY holder IS NOT NULL, worker
          LIMIT 1 FOR UPDATE SKIP LOCKED)
       UPDATE ${this.schema}.worker_leases l
          SET holder = $1, token = nextval('${this.schema}.lease_tokens'),
              expires_at = clock_timestamp() + $2 * interval '1 millisecond',
              high_water_ms = GREATEST(l.high_water_ms, $3)
         FROM candidate c WHERE l.worker = c.worker
       RETURNING l.worker, l.token::text AS token, c.high_water_ms::text AS previous`,
      [
        request.holder,
        request.ttlMs,
        Math.ceil(request.highWaterMs),
        request.sharding.layout.workerCount,
        this.reserved,
      ],
    )
    const row = rows[0] as { worker: number; token: string; previous: string } | undefined
    if (!row) {
      throw allWorkersHeld(
        request,
        `${this.reserved.join(', ')} and the workers of shards installed here`,
      )
    }
    return {
      worker: row.worker,
      token: BigInt(row.token),
      holder: request.holder,
      startAfterMs: Number(row.previous),
      ttlMs: request.ttlMs,
    }
  }

  async renew(lease: WorkerLease, highWaterMs: number): Promise<void> {
    const { rows } = await this.run(
      `UPDATE ${this.schema}.worker_leases
          SET expires_at = clock_timestamp() + $3 * interval '1 millisecond',
              high_water_ms = GREATEST(high_water_ms, $4)
        WHERE worker = $1 AND token = $2 AND holder IS NOT NULL
       RETURNING worker`,
      [lease.worker, lease.token.toString(), lease.ttlMs, Math.ceil(highWaterMs)],
    )
    if (rows.length === 0) {
      throw leaseLost(lease)
    }
  }

  async release(lease: WorkerLease, issuedMs: number): Promise<void> {
    await this.run(
      `UPDATE ${this.schema}.worker_leases
          SET holder = NULL, expires_at = NULL, high_water_ms = GREATEST($3::bigint, 0)
        WHERE worker = $1 AND token = $2 AND holder IS NOT NULL`,
      [lease.worker, lease.token.toString(), Number.isFinite(issuedMs) ? Math.ceil(issuedMs) : 0],
    )
  }

  async list(): Promise<LeaseRecord[]> {
    const exists = await this.run(
      `SELECT to_regclass('${this.schema}.worker_leases') IS NOT NULL AS yes`,
    )
    if (!(exists.rows[0] as { yes: boolean }).yes) return [] // no holder has used this registry
    const { rows } = await this.run(
      `SELECT worker, holder, token::text AS token, expires_at, high_water_ms::text AS high_water_ms
         FROM ${this.schema}.worker_leases ORDER BY worker`,
    )
    return (
      rows as {
        worker: number
        holder: string | null
        token: string
        expires_at: Date | null
        high_water_ms: string
      }[]
    ).map((row) => ({
      worker: row.worker,
      holder: row.holder,
      token: BigInt(row.token),
      expiresAt: row.expires_at,
      highWaterMs: Number(row.high_water_ms),
    }))
  }

  async free(worker: number): Promise<void> {
    await this.run(
      `UPDATE ${this.schema}.worker_leases SET holder = NULL, expires_at = NULL WHERE worker = $1`,
      [worker],
    )
  }

  /** The registry does not own the client: end your pool yourself. */
  async close(): Promise<void> {}

  private async create(sharding: Sharding): Promise<void> {
    const s = this.schema
    await this.run(`CREATE SCHEMA IF NOT EXISTS ${s}`)
    await this.run(`CREATE SEQUENCE IF NOT EXISTS ${s}.lease_tokens`)
    await this.run(
      `CREATE TABLE IF NOT EXISTS ${s}.worker_leases (
         worker integer PRIMARY KEY CHECK (worker >= 0),
         holder text,
         token bigint NOT NULL DEFAULT 0,
         expires_at timestamptz,
         high_water_ms bigint NOT NULL DEFAULT 0)`,
    )
    await this.run(
      `CREATE TABLE IF NOT EXISTS ${s}.lease_sharding (
         only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
         description jsonb NOT NULL)`,
    )
    await this.run(
      `INSERT INTO ${s}.lease_sharding (description) VALUES ($1::jsonb) ON CONFLICT DO NOTHING`,
      [JSON.stringify(sharding.toJSON())],
    )
    const { rows } = await this.run(`SELECT description FROM ${s}.lease_sharding`)
    const recorded = (rows[0] as { description: ShardingDescription }).description
    sharding.checkSame(recorded, `The lease registry in schema ${s}`)
    await this.run(
      `INSERT INTO ${s}.worker_leases (worker)
       SELECT generate_series(0, $1 - 1) ON CONFLICT DO NOTHING`,
      [sharding.layout.workerCount],
    )
  }

  private run(text: string, params?: unknown[]): Promise<{ rows: unknown[] }> {
    return registryCall(() => this.client.query(text, params))
  }
}
