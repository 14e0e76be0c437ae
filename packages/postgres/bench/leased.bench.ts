/**
 * `node bench/leased.bench.ts` (part of `pnpm bench`): the in-process source with a worker leased
 * from PostgreSQL against the same source with a worker fixed by hand, in one run, alternating.
 *
 * Each round makes 2,000,000 IDs spread over 1000 shards (the per-shard cap out of the way) with
 * each source; the ratio of the medians is the cost of the lease (its deadline check on every call
 * and the renewals it sends in the background, every third of its TTL). The renewal traffic is
 * counted at the registry. Every other round runs the leased source first, so that load that drifts
 * during a run falls on both alike. `--json` prints JSON only; `--chart <file>` also writes every
 * round's figures for bench-charts (see bench-charts/README.md). ROUNDS sets the rounds (default 9).
 */
import { writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
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
const chartIndex = process.argv.indexOf('--chart')
const chartFile = chartIndex >= 0 ? process.argv[chartIndex + 1] : undefined
const rounds = Number(process.env.ROUNDS ?? 9)
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
  maxTtlMs: inner.maxTtlMs,
  acquire: (request) => inner.acquire(request),
  renew: (lease, mark) => {
    renewals++
    return inner.renew(lease, mark)
  },
  release: (lease, issued) => inner.release(lease, issued),
  list: () => inner.list(),
  free: (worker) => inner.free(worker),
  quarantine: () => inner.quarantine(),
  recordMaxTtl: () => inner.recordMaxTtl(),
  close: () => inner.close(),
}

const leasedRates: number[] = []
const fixedRates: number[] = []
/** The 1-minute load average at the start of every round, and at the end. */
const loads: number[] = []
const startedAt = performance.now()
try {
  for (let round = 0; round < rounds; round++) {
    loads.push(loadavg()[0]!)
    const leased = await LeasedSource.start({ sharding, registry, ttlMs })
    const runFixed = () => {
      const fixed = new InProcessSource({ sharding, worker: 15 })
      fixedRates.push(run((shard) => fixed.nextId(shard)))
      fixed.close()
    }
    if (round % 2 === 0) runFixed()
    leasedRates.push(run((shard) => leased.nextId(shard)))
    if (round % 2 === 1) runFixed()
    // Let a renewal or two happen between rounds, as they would in a service.
    await new Promise((resolve) => setTimeout(resolve, ttlMs / 2))
    await leased.close()
    log(
      `round ${round + 1}: fixed ${Math.round(fixedRates.at(-1)!)} IDs/s, leased ${Math.round(leasedRates.at(-1)!)} IDs/s (load average ${loads.at(-1)!.toFixed(2)})`,
    )
  }
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  await pool.end()
}
const minutes = (performance.now() - startedAt) / 60_000
loads.push(loadavg()[0]!)
const loadRange = `${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`
const ratios = leasedRates.map((rate, i) => rate / fixedRates[i]!)
const result = {
  rounds,
  idsPerRound: count,
  fixedMedianIdsPerSecond: Math.round(median(fixedRates)),
  leasedMedianIdsPerSecond: Math.round(median(leasedRates)),
  ratio: Number(median(ratios).toFixed(3)),
  ratioRange: [Number(Math.min(...ratios).toFixed(3)), Number(Math.max(...ratios).toFixed(3))],
  ratioOfMedians: Number((median(leasedRates) / median(fixedRates)).toFixed(3)),
  ttlMs,
  renewalsPerMinute: Number((renewals / minutes).toFixed(1)),
  loadAverage: loadRange,
}
if (chartFile) {
  const chart = {
    title: 'LeasedSource (worker leased from PostgreSQL) against a worker fixed by hand',
    unit: 'IDs/s',
    note: [
      `${new Date().toISOString().slice(0, 10)}, ${rounds} rounds of ${count.toLocaleString('en')} IDs over 1000 shards per source, Node ${process.versions.node}`,
      `Load average ${loadRange} (1 min, at the start of every round and at the end) on ${availableParallelism()} shared cores`,
    ],
    baseline: 'fixed worker',
    rows: [
      { label: 'fixed worker', values: fixedRates.map(Math.round) },
      { label: 'leased worker', values: leasedRates.map(Math.round) },
    ],
  }
  writeFileSync(chartFile, JSON.stringify(chart))
}
if (json) console.log(JSON.stringify(result, null, 2))
else {
  log(
    `leased / fixed: ${result.ratio}x, median of the per-round ratios (${result.ratioRange[0]}..${result.ratioRange[1]}); ratio of the medians ${result.ratioOfMedians}x; medians ${result.fixedMedianIdsPerSecond} (fixed) and ${result.leasedMedianIdsPerSecond} (leased) IDs/s; renewals ${result.renewalsPerMinute} per minute with a ${ttlMs} ms TTL; load average ${loadRange}`,
  )
}
