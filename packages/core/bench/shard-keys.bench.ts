/**
 * `node bench/shard-keys.bench.ts` (core, after `pnpm --filter @shardflake/core build`): what
 * placing a shard key costs, per key, in one run (tinybench, `ROUNDS` rounds of 300 ms a task,
 * default 5; the medians of the rounds are reported). `--json` prints JSON only.
 *
 * - integer keys (numbers), the cheapest case, as the baseline;
 * - digit strings ('31341'), read as integers;
 * - text keys ('tenant-17@example.com'), hashed;
 * - the hash alone: `fnv1a32`, which reads the UTF-8 bytes off the string, against FNV-1a over the
 *   bytes `TextEncoder` gives (encode, then hash), the way keys were hashed before;
 * - the shard of an ID (`shardOfId`), a `bigint` and the decimal string a driver returns for a
 *   BIGINT column;
 * - `ShardHomes.writeGroups` of a 1000-row write whose rows are placed by digit-string keys over 64
 *   shards on three servers (per row: placing it and finding its server).
 */
import { loadavg } from 'node:os'
import {
  defineSharding,
  fnv1a32,
  InProcessSource,
  instagram,
  ShardHomes,
  ShardMap,
} from '@shardflake/core'
import { Bench } from 'tinybench'
import { median } from '../../../bench-charts/src/summary.ts'

const json = process.argv.includes('--json')
const rounds = Number(process.env.ROUNDS ?? 5)
const logicalShards = 2000
const sharding = defineSharding({ layout: instagram, logicalShards })
const KEYS = 1000

const numbers = Array.from({ length: KEYS }, (_, i) => 31_341 + i)
const digits = numbers.map(String)
const text = Array.from({ length: KEYS }, (_, i) => `tenant-${i}@example.com`)
const utf8 = new TextEncoder()

function encodedFnv(text: string): number {
  let hash = 0x811c9dc5
  for (const byte of utf8.encode(text)) hash = Math.imul(hash ^ byte, 0x01000193)
  return hash >>> 0
}

// The two hashes agree (the tests check it on any string): a check that the bench compares like
// with like.
for (const key of text) {
  if (encodedFnv(key) !== fnv1a32(key)) throw new Error(`The hashes differ on ${key}.`)
}

const source = new InProcessSource({ sharding, shards: 'all' })
const bigintIds = await source.nextIds(1341, KEYS)
const stringIds = bigintIds.map(String)
source.close()

const homesSharding = defineSharding({ layout: instagram, logicalShards: 64 })
const homes = await ShardHomes.open({
  sharding: homesSharding,
  servers: { a: 'a', b: 'b', c: 'c' },
  directory: new ShardMap(homesSharding, [
    { from: 0, to: 20, target: 'a' },
    { from: 21, to: 41, target: 'b' },
    { from: 42, to: 63, target: 'c' },
  ]),
})
const rows = Array.from({ length: KEYS }, (_, i) => ({ tenant: String(i % 64) }))
const rule = { shardBy: 'tenant' } as const

let sink = 0
const tasks: Record<string, () => void | Promise<void>> = {
  'integer keys': () => {
    for (const key of numbers) sink += sharding.shardForKey(key)
  },
  'digit strings': () => {
    for (const key of digits) sink += sharding.shardForKey(key)
  },
  'text keys': () => {
    for (const key of text) sink += sharding.shardForKey(key)
  },
  'text keys, fnv1a32 alone': () => {
    for (const key of text) sink += fnv1a32(key) % logicalShards
  },
  'text keys, TextEncoder + FNV-1a': () => {
    for (const key of text) sink += encodedFnv(key) % logicalShards
  },
  'shardOfId, bigint IDs': () => {
    for (const id of bigintIds) sink += sharding.shardOfId(id)
  },
  'shardOfId, decimal string IDs': () => {
    for (const id of stringIds) sink += sharding.shardOfId(id)
  },
  'writeGroups of a 1000-row write, per row': async () => {
    const groups = await homes.writeGroups(rows, (row) =>
      homesSharding.resolveShard(rule, row, 'Row'),
    )
    sink += groups.size
  },
}

const nsPerKey: Record<string, number[]> = Object.fromEntries(
  Object.keys(tasks).map((name) => [name, []]),
)
for (let round = 0; round < rounds; round++) {
  const bench = new Bench({ time: 300, warmup: true })
  for (const [name, run] of Object.entries(tasks)) bench.add(name, run)
  await bench.run()
  for (const task of bench.tasks) {
    const result = task.result as { latency?: { mean: number }; mean?: number }
    const msPerLap = result.latency?.mean ?? result.mean ?? Number.NaN
    nsPerKey[task.name]!.push((msPerLap * 1e6) / KEYS)
  }
}
await homes.close()

const report = {
  rounds,
  loadavg: loadavg(),
  nsPerKey: Object.fromEntries(
    Object.entries(nsPerKey).map(([name, values]) => [
      name,
      {
        median: Number(median(values).toFixed(1)),
        min: Number(Math.min(...values).toFixed(1)),
        max: Number(Math.max(...values).toFixed(1)),
      },
    ]),
  ),
  sink: sink % 7,
}
if (json) console.log(JSON.stringify(report, null, 2))
else {
  for (const [name, { median: ns, min, max }] of Object.entries(report.nsPerKey)) {
    console.log(`${name.padEnd(42)} ${ns.toFixed(1).padStart(8)} ns each (${min}..${max})`)
  }
}
