import { spawnSync } from 'node:child_process'
import { Redis } from 'ioredis'

/** Ports of the extra Redis servers the tests start (never the shared 6379). */
export function extraPorts(): number[] {
  const list = process.env.SHARDFLAKE_REDIS_EXTRA_PORTS ?? '6390,6391,6392'
  return list.split(',').map((port) => Number(port.trim()))
}

/** The shared Redis (`REDIS_URL` overrides). */
export const sharedRedisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

export const urlOf = (port: number) => `redis://127.0.0.1:${port}`

async function ping(port: number): Promise<boolean> {
  const client = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 500,
  })
  client.on('error', () => {})
  try {
    await client.connect()
    return (await client.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}

/** Starts a memory-only redis-server on `port` and waits until it answers. */
export async function startRedis(port: number): Promise<void> {
  if (await ping(port)) {
    throw new Error(
      `Port ${port} already answers PING: the Redis tests start their own servers there. Stop it, or set SHARDFLAKE_REDIS_EXTRA_PORTS to three free ports.`,
    )
  }
  const result = spawnSync(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--daemonize',
      'yes',
      '--save',
      '',
      '--appendonly',
      'no',
      '--pidfile',
      `/tmp/shardflake-redis-${port}.pid`,
      '--logfile',
      `/tmp/shardflake-redis-${port}.log`,
    ],
    { encoding: 'utf8' },
  )
  if (result.status !== 0) throw new Error(`redis-server on ${port} failed: ${result.stderr}`)
  for (let i = 0; i < 100; i++) {
    if (await ping(port)) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`redis-server on ${port} did not answer.`)
}

/** Stops the server on `port` without saving (only servers this test run started). */
export async function stopRedis(port: number): Promise<void> {
  const client = new Redis(port, '127.0.0.1', {
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  client.on('error', () => {})
  try {
    await client.call('SHUTDOWN', 'NOSAVE')
  } catch {
    // SHUTDOWN closes the connection instead of answering.
  } finally {
    client.disconnect()
  }
  for (let i = 0; i < 100; i++) {
    if (!(await ping(port))) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`redis-server on ${port} did not stop.`)
}

/** Deletes every key under `prefix` on the server at `url`. */
export async function deletePrefix(url: string, prefix: string): Promise<void> {
  const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null })
  client.on('error', () => {})
  try {
    let cursor = '0'
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
      if (keys.length > 0) await client.del(...keys)
      cursor = next
    } while (cursor !== '0')
  } finally {
    client.disconnect()
  }
}
