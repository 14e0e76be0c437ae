import { join } from 'node:path'
import mysql from 'mysql2/promise'
import { startServer } from './start-server'
import type { DatabaseServerOptions, ThrowawayServer } from './throwaway-server'

/**
 * A MariaDB server of its own (mariadb-install-db into a temporary directory, `root` without a
 * password, database `test`), listening on 127.0.0.1 and a socket in its directory.
 */
export async function startMariadb(options: DatabaseServerOptions = {}): Promise<ThrowawayServer> {
  return await startServer(
    {
      kind: 'mariadb',
      user: 'mysql',
      prepare(directory, run) {
        run('mariadb-install-db', [
          '--no-defaults',
          `--datadir=${join(directory, 'data')}`,
          '--auth-root-authentication-method=normal',
          '--skip-test-db',
          // Its own temporary directory: servers bootstrapping at once collide in a shared /tmp.
          `--tmpdir=${directory}`,
        ])
      },
      command: (directory, port) => ({
        file: 'mariadbd',
        args: [
          '--no-defaults',
          `--datadir=${join(directory, 'data')}`,
          `--socket=${join(directory, 'mariadb.sock')}`,
          `--pid-file=${join(directory, 'mariadb.pid')}`,
          `--tmpdir=${directory}`,
          `--port=${port}`,
          '--bind-address=127.0.0.1',
          '--skip-log-bin',
          '--innodb-buffer-pool-size=32M',
          '--innodb-log-file-size=16M',
          `--innodb-flush-log-at-trx-commit=${options.durable ? 1 : 2}`,
          '--skip-performance-schema',
          ...(options.maxConnections ? [`--max-connections=${options.maxConnections}`] : []),
        ],
      }),
      url: (port) => `mysql://root@127.0.0.1:${port}/test`,
      async probe(port) {
        const connection = await mysql.createConnection({
          host: '127.0.0.1',
          port,
          user: 'root',
          connectTimeout: 2_000,
        })
        try {
          await connection.query('CREATE DATABASE IF NOT EXISTS test')
        } finally {
          await connection.end().catch(() => undefined)
        }
      },
      stopSignal: 'SIGTERM',
    },
    options,
  )
}
