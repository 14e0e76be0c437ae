import { ConfigurationError, InvalidArgumentError } from './errors'
import { describeValue } from './known-options'
import { requireSharding, type Sharding } from './sharding'

/**
 * The worker id of this process from its environment, for deployments that hand out ids
 * themselves (no registry): `SHARDFLAKE_WORKER`, else the ordinal of a Kubernetes StatefulSet
 * pod (`HOSTNAME` = `app-3` gives 3). Validated against the layout, never masked or hashed.
 * A restarted process must not come back within `maxDriftMs` of its predecessor's last ID.
 * @throws ConfigurationError when neither is set or the id does not fit the worker bits.
 * @example
 * ```ts
 * import { InProcessSource, workerFromEnvironment, type Sharding } from '@shardflake/core'
 * declare const sharding: Sharding
 *
 * const source = new InProcessSource({ sharding, worker: workerFromEnvironment(sharding) })
 * ```
 */
export function workerFromEnvironment(
  sharding: Sharding,
  env: Readonly<Record<string, string | undefined>> = globalThis.process?.env ?? {},
): number {
  const { layout } = requireSharding(sharding, 'workerFromEnvironment')
  if (typeof env !== 'object' || env === null) {
    throw new InvalidArgumentError(
      `workerFromEnvironment reads an environment object (like process.env), got ${describeValue(env)}.`,
    )
  }
  const explicit = typeof env.SHARDFLAKE_WORKER === 'string' ? env.SHARDFLAKE_WORKER : undefined
  const hostname = typeof env.HOSTNAME === 'string' ? env.HOSTNAME : ''
  const ordinal = /-(\d+)$/.exec(hostname)?.[1]
  const text = explicit ?? ordinal
  const from = explicit !== undefined ? 'SHARDFLAKE_WORKER' : 'the StatefulSet ordinal in HOSTNAME'
  if (text === undefined) {
    throw new ConfigurationError(
      'No worker id in the environment: set SHARDFLAKE_WORKER, or run as a StatefulSet pod (HOSTNAME ends in -<ordinal>), or lease one with LeasedSource.',
    )
  }
  const worker = /^\d{1,10}$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isSafeInteger(worker) || worker >= layout.workerCount) {
    throw new ConfigurationError(
      `Worker ${JSON.stringify(text)} from ${from} does not fit the ${layout.workerBits} worker bits of layout ${JSON.stringify(layout.name)} (0 to ${layout.workerCount - 1}). Ids are never masked: two processes would share one.`,
    )
  }
  return worker
}
