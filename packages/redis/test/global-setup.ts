import { extraPorts, startRedis, stopRedis } from './redis-servers'

/**
 * Starts the extra memory-only Redis servers the multi-server, failover and restart tests use
 * (default ports 6390-6392, `SHARDFLAKE_REDIS_EXTRA_PORTS` overrides) and stops them afterwards.
 * The shared server on 6379 is never started or stopped here.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const ports = extraPorts()
  const started: number[] = []
  try {
    for (const port of ports) {
      await startRedis(port)
      started.push(port)
    }
  } catch (error) {
    for (const port of started) await stopRedis(port)
    throw error
  }
  return async () => {
    for (const port of started) await stopRedis(port).catch(() => {})
  }
}
