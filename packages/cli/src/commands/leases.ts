import { InvalidArgumentError, type LeaseRecord, type LeaseRegistry } from '@shardflake/core'
import { Argument, type Command, Option } from 'commander'
import type { CliIo } from '../cli-io'
import { runGuarded, wholeNumberFlag } from '../install-options'

interface LeasesFlags {
  url?: string
  schema: string
  database: string
  keyPrefix: string
  free?: string
  restored?: boolean
  maxTtl?: string
  json?: boolean
}

const URL_VARIABLES = { postgres: 'DATABASE_URL', mysql: 'MYSQL_URL', redis: 'REDIS_URL' } as const
type Registry = keyof typeof URL_VARIABLES

/**
 * `shardflake leases <postgres|mysql|redis>` shows every worker of a lease registry: its holder,
 * fencing token, expiry and high-water mark; `--free <worker>` frees a worker whose holder is
 * known to be dead (its high-water mark stays, so the next holder still starts above it);
 * `--restored` makes a registry restored from an older copy grant nothing for its `maxTtlMs`;
 * `--max-ttl <ms>` records another `maxTtlMs`.
 */
export function registerLeasesCommand(program: Command, io: CliIo): void {
  program
    .command('leases')
    .description('show the worker leases of a registry, or free the worker of a dead holder')
    .addArgument(
      new Argument('<registry>', 'where the leases live').choices(Object.keys(URL_VARIABLES)),
    )
    .option('--url <url>', 'the server (default: $DATABASE_URL, $MYSQL_URL or $REDIS_URL)')
    .option('--schema <name>', 'PostgreSQL schema of the lease tables', 'shardflake')
    .option('--database <name>', 'MySQL/MariaDB database of the lease tables', 'shardflake')
    .option('--key-prefix <prefix>', 'Redis key prefix of the registry', 'shardflake:')
    .addOption(new Option('--free <worker>', 'free this worker (its holder is known to be dead)'))
    .option(
      '--restored',
      'the registry was restored from an older copy: grant nothing for its maxTtlMs',
    )
    .option('--max-ttl <ms>', "record this maxTtlMs (every process's registries must use it)")
    .option('--json', 'print JSON only')
    .action(async (registry: string, flags: LeasesFlags) => {
      const kind = readRegistry(registry)
      const url = flags.url ?? process.env[URL_VARIABLES[kind]]
      if (!url) {
        throw new InvalidArgumentError(
          `Give the ${kind} server with --url or ${URL_VARIABLES[kind]}.`,
        )
      }
      const worker = wholeNumberFlag('--free', flags.free)
      const maxTtlMs = wholeNumberFlag('--max-ttl', flags.maxTtl)
      const { open, close } = await connect(kind, url, flags, maxTtlMs)
      const { records, waitsUntil } = await runGuarded(
        `Could not read the leases in ${kind}`,
        async () => {
          const leases = await open()
          if (maxTtlMs !== undefined) await leases.recordMaxTtl()
          const waitsUntil = flags.restored ? await leases.quarantine() : undefined
          if (worker !== undefined) await leases.free(worker)
          return { records: await leases.list(), waitsUntil }
        },
        close,
      )
      if (flags.json) {
        io.stdout(JSON.stringify(records.map(describe), null, 2))
        return
      }
      if (maxTtlMs !== undefined) io.stdout(`recorded maxTtlMs ${maxTtlMs}`)
      if (waitsUntil === null) {
        io.stdout('This registry holds no record yet: there is nothing to wait for.')
      } else if (waitsUntil) {
        io.stdout(
          `The registry grants no lease until ${waitsUntil.toISOString()}: every holder it may have forgotten has stopped by then.`,
        )
      }
      if (worker !== undefined) io.stdout(`freed worker ${worker}`)
      if (records.length === 0) {
        io.stdout(`No worker leases in this ${kind} registry yet: no LeasedSource has used it.`)
        return
      }
      io.stdout(formatTable(records))
    })
}

function readRegistry(value: string): Registry {
  if (value in URL_VARIABLES) return value as Registry
  throw new InvalidArgumentError(
    `Unknown registry ${JSON.stringify(value)}: use postgres, mysql or redis.`,
  )
}

async function connect(
  kind: Registry,
  url: string,
  flags: LeasesFlags,
  maxTtlMs: number | undefined,
): Promise<{ open: () => Promise<LeaseRegistry>; close: () => Promise<unknown> }> {
  const options = maxTtlMs === undefined ? {} : { maxTtlMs }
  if (kind === 'postgres') {
    const [{ default: pg }, { PostgresLeaseRegistry }] = await Promise.all([
      import('pg'),
      import('@shardflake/postgres'),
    ])
    const pool = new pg.Pool({ connectionString: url, max: 1 })
    pool.on('error', () => {})
    return {
      open: async () => new PostgresLeaseRegistry(pool, { ...options, schema: flags.schema }),
      close: () => pool.end(),
    }
  }
  if (kind === 'mysql') {
    const [{ default: mysql }, { MysqlLeaseRegistry }] = await Promise.all([
      import('mysql2/promise'),
      import('@shardflake/mysql'),
    ])
    const pool = mysql.createPool({ uri: url, connectionLimit: 1 })
    return {
      open: async () => new MysqlLeaseRegistry(pool, { ...options, database: flags.database }),
      close: () => pool.end(),
    }
  }
  const [{ Redis }, { RedisLeaseRegistry }] = await Promise.all([
    import('ioredis'),
    import('@shardflake/redis'),
  ])
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  redis.on('error', () => {})
  return {
    open: async () => {
      await redis.connect()
      return new RedisLeaseRegistry(redis, { ...options, keyPrefix: flags.keyPrefix })
    },
    close: async () => redis.disconnect(),
  }
}

function describe(record: LeaseRecord) {
  return {
    worker: record.worker,
    holder: record.holder,
    token: record.token.toString(),
    expiresAt: record.expiresAt?.toISOString() ?? null,
    highWater: record.highWaterMs > 0 ? new Date(record.highWaterMs).toISOString() : null,
  }
}

function formatTable(records: readonly LeaseRecord[]): string {
  const rows = [
    ['worker', 'holder', 'token', 'expires', 'high-water mark'],
    ...records.map((record) => {
      const row = describe(record)
      return [
        String(row.worker),
        row.holder ?? '(free)',
        row.token,
        row.expiresAt ?? '-',
        row.highWater ?? '-',
      ]
    }),
  ]
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}
