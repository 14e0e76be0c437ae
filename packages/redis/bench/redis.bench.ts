// IDs per second from RedisSource against a bare INCR (the floor), in one run, alternating.
// Run after `pnpm build`: node bench/redis.bench.ts [--seconds 1] [--rounds 5] [--json] [--chart <file>]
// `--chart` also writes every round's figures for bench-charts (see bench-charts/README.md).
// REDIS_URL overrides redis://127.0.0.1:6379.
import { writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { defineSharding, instagram } from '@shardflake/core'
import { RedisSource, recommendedRedisOptions } from '@shardflake/redis'
import { Redis } from 'ioredis'

const args = process.argv.slice(2)
const flag = (name: string, fallback: number) => {
  const at = args.indexOf(`--${name}`)
  return at >= 0 ? Number(args[at + 1]) : fallback
}
const seconds = flag('seconds', 0.5)
const rounds = flag('rounds', 9)
const json = args.includes('--json')
const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = `sf:redis:bench:${process.pid}:`

const incr = new Redis(url, recommendedRedisOptions)
const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
const source = new RedisSource({ sharding, servers: url, keyPrefix: prefix })

interface Mode {
  name: string
  /** One call; resolves to the number of IDs it produced. */
  run: (i: number) => Promise<number>
  /** Calls in flight at once. */
  inFlight: number
}

const modes: Mode[] = [
  { name: 'INCR, 1 in flight', inFlight: 1, run: () => incr.incr(`${prefix}incr`).then(() => 1) },
  { name: 'nextId, 1 in flight', inFlight: 1, run: () => source.nextId(1).then(() => 1) },
  {
    name: 'INCR, 16 in flight',
    inFlight: 16,
    run: () => incr.incr(`${prefix}incr`).then(() => 1),
  },
  { name: 'nextId, 16 in flight', inFlight: 16, run: () => source.nextId(2).then(() => 1) },
  {
    name: 'nextIds(100), 1 shard',
    inFlight: 1,
    run: () => source.nextIds(3, 100).then((ids) => ids.length),
  },
  {
    name: 'nextIds(1000), 64 shards in turn',
    inFlight: 1,
    run: (i) => source.nextIds(100 + (i % 64), 1_000).then((ids) => ids.length),
  },
]

async function measure(mode: Mode): Promise<{ calls: number; ids: number; perSecond: number }> {
  const end = performance.now() + seconds * 1_000
  let calls = 0
  let ids = 0
  await Promise.all(
    Array.from({ length: mode.inFlight }, async () => {
      while (performance.now() < end) {
        const produced = await mode.run(calls++)
        ids += produced
      }
    }),
  )
  const elapsed = seconds + (performance.now() - end) / 1_000
  return { calls, ids, perSecond: ids / elapsed }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

// Warm up: connections, script load, JIT.
for (const mode of modes) await measureShort(mode)
async function measureShort(mode: Mode) {
  for (let i = 0; i < 200; i++) await mode.run(i)
}

const samples = new Map<string, number[]>(modes.map((mode) => [mode.name, []]))
for (let round = 0; round < rounds; round++) {
  // Alternate the order each round so drift in machine load hits every mode alike.
  const order = round % 2 === 0 ? modes : [...modes].reverse()
  for (const mode of order) samples.get(mode.name)!.push((await measure(mode)).perSecond)
}

const rate = (name: string) => median(samples.get(name)!)
const incrSingle = rate('INCR, 1 in flight')
const idSingle = rate('nextId, 1 in flight')
const rows = modes.map((mode) => {
  const values = samples.get(mode.name)!
  return {
    mode: mode.name,
    idsPerSecond: Math.round(median(values)),
    min: Math.round(Math.min(...values)),
    max: Math.round(Math.max(...values)),
    vsIncrSingle: median(values) / incrSingle,
    vsNextIdSingle: median(values) / idSingle,
  }
})
// Ratios per round (both sides measured seconds apart), then the median: robust to load drift.
const roundRatio = (a: string, b: string) =>
  median(samples.get(a)!.map((value, round) => value / samples.get(b)![round]!))
const targets = {
  singleVsIncr: { value: roundRatio('nextId, 1 in flight', 'INCR, 1 in flight'), target: 0.5 },
  concurrentVsIncr: {
    value: roundRatio('nextId, 16 in flight', 'INCR, 16 in flight'),
    target: undefined,
  },
  batchedVsSingle: {
    value: roundRatio('nextIds(100), 1 shard', 'nextId, 1 in flight'),
    target: 20,
  },
}

const chartAt = args.indexOf('--chart')
if (chartAt >= 0) {
  const chart = {
    title: 'RedisSource against a bare INCR on the same Redis',
    unit: 'IDs/s',
    note: [
      `${new Date().toISOString().slice(0, 10)}, ${rounds} rounds of ${seconds} s per mode, Node ${process.versions.node}`,
      `Load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores at the end of the run`,
    ],
    baseline: 'INCR, 1 in flight',
    rows: modes.map((mode) => ({
      label: mode.name,
      values: samples.get(mode.name)!.map(Math.round),
    })),
  }
  writeFileSync(args[chartAt + 1]!, JSON.stringify(chart))
}

if (json) {
  console.log(JSON.stringify({ seconds, rounds, rows, targets }, null, 2))
} else {
  console.log(`Redis ${url}, ${rounds} rounds of ${seconds} s per mode, medians (min..max)\n`)
  console.log('| mode | IDs/s | min..max | x INCR (1 in flight) | x nextId (1 in flight) |')
  console.log('|---|---:|---:|---:|---:|')
  for (const row of rows) {
    console.log(
      `| ${row.mode} | ${row.idsPerSecond.toLocaleString('en')} | ${row.min.toLocaleString('en')}..${row.max.toLocaleString('en')} | ${row.vsIncrSingle.toFixed(2)} | ${row.vsNextIdSingle.toFixed(1)} |`,
    )
  }
  console.log('\nMedian of the per-round ratios:')
  console.log(
    `nextId / INCR (1 in flight): ${targets.singleVsIncr.value.toFixed(2)}x (target >= 0.5x)`,
  )
  console.log(`nextId / INCR (16 in flight): ${targets.concurrentVsIncr.value.toFixed(2)}x`)
  console.log(
    `nextIds(100) / nextId (1 in flight): ${targets.batchedVsSingle.value.toFixed(1)}x (target >= 20x)`,
  )
}

const cleaner = new Redis(url)
const keys = await cleaner.keys(`${prefix}*`)
if (keys.length > 0) await cleaner.del(...keys)
cleaner.disconnect()
incr.disconnect()
await source.close()
