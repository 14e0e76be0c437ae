import { redisCommand } from './redis-command'
import { startServer } from './start-server'
import type { ServerOptions, ThrowawayServer } from './throwaway-server'

/** A Redis server of its own (no persistence: a restart empties it), listening on 127.0.0.1. */
export async function startRedis(options: ServerOptions = {}): Promise<ThrowawayServer> {
  return await startServer(
    {
      kind: 'redis',
      command: (directory, port) => ({
        file: 'redis-server',
        args: [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
          '--dir',
          directory,
        ],
      }),
      url: (port) => `redis://127.0.0.1:${port}`,
      async probe(port) {
        const reply = await redisCommand(port, ['PING'])
        if (reply !== 'PONG') throw new Error(`PING answered ${JSON.stringify(reply)}`)
      },
      stopSignal: 'SIGTERM',
    },
    options,
  )
}
