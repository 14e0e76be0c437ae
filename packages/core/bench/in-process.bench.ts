/**
 * `pnpm bench` (core): the in-process source against @sapphire/snowflake and uuid v7, in one run.
 *
 * 1. One shard, sustained: 2,000,000 IDs as fast as possible. The layout caps a shard at 1024 IDs
 *    per ms, so the target is >= 95% of that (973,000 IDs/s) with zero duplicates. The peers are
 *    run the same way and their duplicates counted.
 * 2. Many shards (tinybench): IDs spread over 1000 shards, where the per-shard cap is out of the
 *    way, against @sapphire/snowflake (which never checks its cap) and uuid v7.
 *
 * Runs alternate and the medians of several rounds are reported. `--json` prints JSON only;
 * `--chart <file>` also writes every round's figures for bench-charts (see bench-charts/README.md).
 */
import { writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { Snowflake } from '@sapphire/snowflake'
import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { Bench } from 'tinybench'
import { v7 as uuidv7 } from 'uuid'
import { median } from '../../../bench-charts/src/summary.ts'

const json = process.argv.includes('--json')
const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
const rounds = Number(process.env.ROUNDS ?? 5)
const sustainedCount = 2_000_000
const log = (text: string) => {
  if (!json) console.log(text)
}

interface Sustained {
  idsPerSecond: number
  duplicates: number
}

function sustained(next: () => bigint | string): Sustained {
  const ids = new Array<bigint | string>(sustainedCount)
  const start = performance.now()
  for (let i = 0; i < sustainedCount; i++) ids[i] = next()
  const seconds = (performance.now() - start) / 1000
  return { idsPerSecond: sustainedCount / seconds, duplicates: sustainedCount - new Set(ids).size }
}

log(`One shard, ${sustainedCount.toLocaleString('en')} IDs, ${rounds} alternating rounds...`)
const oneShard: Record<string, Sustained[]> = { shardflake: [], sapphire: [], uuidv7: [] }
for (let round = 0; round < rounds; round++) {
  const source = new InProcessSource({ sharding, shards: 'all' })
  oneShard.shardflake!.push(sustained(() => source.nextId(1341)))
  source.close()
  const snowflake = new Snowflake(instagram.epoch)
  oneShard.sapphire!.push(sustained(() => snowflake.generate({ workerId: 1n, processId: 1n })))
  oneShard.uuidv7!.push(sustained(() => uuidv7()))
}
const summary = (runs: Sustained[]) => ({
  idsPerSecond: Math.round(median(runs.map((run) => run.idsPerSecond))),
  duplicates: Math.max(...runs.map((run) => run.duplicates)),
})
const single = Object.fromEntries(
  Object.entries(oneShard).map(([name, runs]) => [name, summary(runs)]),
)
const capacity = instagram.capacityPerMs * 1000
const singleShardOfCapacity = single.shardflake!.idsPerSecond / capacity

log('Many shards (1000), tinybench...')
const manyShards: Record<string, number[]> = { shardflake: [], sapphire: [], uuidv7: [] }
for (let round = 0; round < rounds; round++) {
  const source = new InProcessSource({ sharding, shards: 'all' })
  const snowflake = new Snowflake(instagram.epoch)
  let shard = 0
  const bench = new Bench({ time: 300, warmup: true })
  bench
    .add('shardflake', () => {
      shard = shard === 999 ? 0 : shard + 1
      source.nextId(shard)
    })
    .add('sapphire', () => {
      snowflake.generate()
    })
    .add('uuidv7', () => {
      uuidv7()
    })
  await bench.run()
  source.close()
  for (const task of bench.tasks) {
    const result = task.result as { throughput?: { mean: number }; hz?: number }
    manyShards[task.name]!.push(result.throughput?.mean ?? result.hz ?? 0)
  }
}
const many = Object.fromEntries(
  Object.entries(manyShards).map(([name, runs]) => [name, Math.round(median(runs))]),
)
const manyRatio = many.shardflake! / many.sapphire!

const report = {
  rounds,
  oneShard: {
    ...single,
    capacityIdsPerSecond: capacity,
    shardflakeOfCapacity: Number(singleShardOfCapacity.toFixed(3)),
  },
  manyShards: {
    idsPerSecond: many,
    shardflakeVsSapphire: Number(manyRatio.toFixed(3)),
    shardflakeVsUuidv7: Number((many.shardflake! / many.uuidv7!).toFixed(3)),
  },
  targets: { oneShardOfCapacity: 0.95, manyShardsVsSapphire: 0.8 },
}

const chartAt = process.argv.indexOf('--chart')
if (chartAt >= 0) {
  const labels: Record<string, string> = {
    shardflake: 'shardflake',
    sapphire: '@sapphire/snowflake',
    uuidv7: 'uuid v7',
  }
  const chart = {
    title: 'In-process source against @sapphire/snowflake and uuid v7',
    unit: 'IDs/s',
    note: [
      `${new Date().toISOString().slice(0, 10)}, ${rounds} rounds, Node ${process.versions.node}`,
      `Load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores at the end of the run`,
    ],
    baseline: '@sapphire/snowflake',
    rows: [
      ...Object.entries(oneShard).map(([name, runs]) => ({
        group: `One shard, ${sustainedCount.toLocaleString('en')} IDs`,
        label: labels[name]!,
        values: runs.map((run) => Math.round(run.idsPerSecond)),
      })),
      ...Object.entries(manyShards).map(([name, values]) => ({
        group: '1,000 shards (tinybench)',
        label: labels[name]!,
        values: values.map(Math.round),
      })),
    ],
  }
  writeFileSync(process.argv[chartAt + 1]!, JSON.stringify(chart))
}

if (json) {
  console.log(JSON.stringify(report, null, 2))
} else {
  const fmt = (n: number) => n.toLocaleString('en')
  console.log('\nOne shard, sustained (median IDs/s; worst duplicates per 2M):')
  for (const [name, result] of Object.entries(single)) {
    console.log(
      `  ${name.padEnd(11)} ${fmt(result.idsPerSecond).padStart(12)}   duplicates ${fmt(result.duplicates)}`,
    )
  }
  console.log(
    `  shardflake at ${(singleShardOfCapacity * 100).toFixed(1)}% of the layout's ${fmt(capacity)} IDs/s (target 95%)`,
  )
  console.log('\nMany shards (median IDs/s):')
  for (const [name, hz] of Object.entries(many))
    console.log(`  ${name.padEnd(11)} ${fmt(hz).padStart(12)}`)
  console.log(`  shardflake / sapphire = ${manyRatio.toFixed(2)}x (target >= 0.80x)`)
}
