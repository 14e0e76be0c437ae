/**
 * `node bench/leased.bench.ts` (part of `pnpm bench`): the in-process source with a worker leased
 * from PostgreSQL against the same source with a worker fixed by hand, in one run, alternating.
 *
 * Each round makes 2,000,000 IDs spread over 1000 shards (the per-shard cap out of the way) with
 * each source; the ratio of the medians is the cost of the lease (its deadline check on every call
 * and the renewals it sends in the background, every third of its TTL). The renewal traffic is
 * counted at the registry. `--json` prints JSON only.
 */
import {
  defineLayout,
  defineSharding,
  InProcessSource,
  LeasedSource,
  type LeaseRegistry,
} from '@shardflake/core'
import { PostgresLeaseRegistry } from '@shardflake/postgres'
import pg from 'pg'

const json = process.argv.includes('--json')
const rounds = Number(process.env.ROUNDS ?? 7)
const count = 2_000_000
const ttlMs = 3000
const url = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const log = (text: string) => {
  if (!json) console.log(text)
}
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

const layout = defineLayout({
  name: 'leased',
  epoch: '2025-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  workerBits: 4,
  sequenceBits: 6,
})
const sharding = defineSharding({ layout, logicalShards: 1000 })

function run(next: (shard: number) => bigint): number {
  const start = performance.now()
  for (let i = 0; i < count; i++) next(i % 1000)
  return count / ((performance.now() - start) / 1000)
}

const pool = new pg.Pool({ connectionString: url, max: 2 })
const schema = `leased_bench_${process.pid}`
let renewals = 0
const inner = new PostgresLeaseRegistry(pool, { schema })
const registry: LeaseRegistry = {
  acquire: (request) => inner.acquire(request),
  renew: (lease, mark) => {
    renewals++
    return inner.renew(lease, mark)
  },
  release: (lease, issued) => inner.release(lease, issued),
  list: () => inner.list(),
  free: (worker) => inner.free(worker),
  close: () => inner.close(),
}

const leasedRates: number[] = []
const fixedRates: number[] = []
const startedAt = performance.now()
try {
  for (let round = 0; round < rounds; round++) {
    const fixed = new InProcessSource({ sharding, worker: 15 })
    fixedRates.push(run((shard) => fixed.nextId(shard)))
    fixed.close()
    const leased = await LeasedSource.start({ sharding, registry, ttlMs })
    leasedRates.push(run((shard) => leased.nextId(shard)))
    // Let a renewal or two happen between rounds, as they would in a service.
    await new Promise((resolve) => setTimeout(resolve, ttlMs / 2))
    await leased.close()
    log(
      `round ${round + 1}: fixed ${Math.round(fixedRates.at(-1)!)} IDs/s, leased ${Math.round(leasedRates.at(-1)!)} IDs/s`,
    )
  }
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  await pool.end()
}
const minutes = (performance.now() - startedAt) / 60_000
const ratios = leasedRates.map((rate, i) => rate / fixedRates[i]!)
const result = {
  rounds,
  idsPerRound: count,
  fixedMedianIdsPerSecond: Math.round(median(fixedRates)),
  leasedMedianIdsPerSecond: Math.round(median(leasedRates)),
  ratioOfMedians: Number((median(leasedRates) / median(fixedRates)).toFixed(3)),
  ratioRange: [Number(Math.min(...ratios).toFixed(3)), Number(Math.max(...ratios).toFixed(3))],
  ttlMs,
  renewalsPerMinute: Number((renewals / minutes).toFixed(1)),
}
if (json) console.log(JSON.stringify(result, null, 2))
else {
  log(
    `leased / fixed: ${result.ratioOfMedians}x (per-round ratios ${result.ratioRange[0]}-${result.ratioRange[1]}), renewals ${result.renewalsPerMinute} per minute with a ${ttlMs} ms TTL`,
  )
}
