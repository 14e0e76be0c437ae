import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { startServer } from './start-server'
import type { DatabaseServerOptions, ThrowawayServer } from './throwaway-server'

function postgresBin(name: string): string {
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((entry) => existsSync(join(root, entry, 'bin', name)))
        .sort((a, b) => Number(b) - Number(a))
    : []
  if (versions.length === 0) {
    throw new Error(
      `startPostgres: no ${name} under ${root}/*/bin (install the PostgreSQL server).`,
    )
  }
  return join(root, versions[0]!, 'bin', name)
}

/**
 * A PostgreSQL server of its own (initdb into a temporary directory, trust authentication, user
 * `postgres`, fsync off unless `durable`), listening on 127.0.0.1 and a socket in its directory.
 * `url` points at database `postgres`.
 */
export async function startPostgres(options: DatabaseServerOptions = {}): Promise<ThrowawayServer> {
  const durable = options.durable ? 'on' : 'off'
  return await startServer(
    {
      kind: 'postgres',
      user: 'postgres',
      prepare(directory, run) {
        run(postgresBin('initdb'), [
          '-D',
          join(directory, 'data'),
          '-U',
          'postgres',
          '--auth=trust',
          '--encoding=UTF8',
          '--no-locale',
          '--no-sync',
        ])
      },
      command: (directory, port) => ({
        file: postgresBin('postgres'),
        args: [
          '-D',
          join(directory, 'data'),
          '-p',
          String(port),
          '-k',
          directory,
          '-c',
          'listen_addresses=127.0.0.1',
          '-c',
          `fsync=${durable}`,
          '-c',
          `full_page_writes=${durable}`,
          '-c',
          'shared_buffers=16MB',
          '-c',
          `max_connections=${options.maxConnections ?? 100}`,
        ],
      }),
      url: (port) => `postgres://postgres@127.0.0.1:${port}/postgres`,
      async probe(port) {
        const client = new pg.Client({
          connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`,
          connectionTimeoutMillis: 2_000,
        })
        client.on('error', () => undefined)
        try {
          await client.connect()
          await client.query('SELECT 1')
        } finally {
          await client.end().catch(() => undefined)
        }
      },
      stopSignal: 'SIGINT',
      immediateSignal: 'SIGQUIT',
    },
    options,
  )
}
