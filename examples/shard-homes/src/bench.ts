/**
 * `pnpm bench` (not a test): what routing costs.
 *
 * (a) Router overhead: the same writes of posts, 1 row and 100 rows a call, through the routed
 *     handles (`shardedDataSources().save`, `shardedClients` `createMany`,
 *     `shardedOrms().createAndFlush`) and straight through server a's own DataSource, client or
 *     MikroORM instance. Every post lives on a, so both write the same rows to the same server;
 *     the routed call adds finding the home and grouping the rows. Calls alternate between the
 *     two modes (the order flips with every pair); a round's figure for a mode is its median call
 *     in rows/s; the ratio is taken within the round; medians over rounds and the smallest and
 *     largest round are reported. PostgreSQL's statement log is off for this part.
 * (b) A 1000-row save spread over the three servers: the INSERT statements each server executed
 *     (its own counters: PostgreSQL's statement log, MariaDB's `Com_insert`).
 *
 * node --experimental-transform-types --import ./src/hooks.ts src/bench.ts
 *   [--dialect=postgres|mariadb] [--orm=typeorm,prisma,mikro-orm] [--rounds=11]
 *   [--single=60] [--batches=10] [--chart <file>] [--json]
 */
import { writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { InProcessSource } from '@shardflake/core'
import { openBlog } from './app.ts'
import { type NewPost, ORMS, type OrmName, type RoutedBlog } from './blog.ts'
import { type ExampleDialect, sharding, shardMap, startExampleServers } from './servers.ts'

const { values } = parseArgs({
  // `pnpm start -- --dialect=mariadb` passes the `--` on.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    dialect: { type: 'string', default: 'postgres' },
    orm: { type: 'string', default: ORMS.join(',') },
    rounds: { type: 'string', default: '7' },
    single: { type: 'string', default: '60' },
    batches: { type: 'string', default: '10' },
    chart: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
})
const dialect = values.dialect as ExampleDialect
if (dialect !== 'postgres' && dialect !== 'mariadb') {
  throw new Error(`--dialect takes postgres or mariadb, got ${values.dialect}`)
}
const orms = values.orm.split(',').map((name) => name.trim()) as OrmName[]
for (const orm of orms) {
  if (!ORMS.includes(orm)) throw new Error(`--orm takes ${ORMS.join(', ')}, got ${orm}`)
}
const rounds = Number(values.rounds)
const singles = Number(values.single)
const batches = Number(values.batches)
const log = (line: string) => {
  if (!values.json) console.log(line)
}

/** Emails whose shard lives on `server`, and emails spread over every server. */
function emailsOn(server: string | undefined, count: number, tag: string): string[] {
  const emails: string[] = []
  for (let i = 0; emails.length < count; i++) {
    const email = `${tag}${i}@example.com`
    if (!server || shardMap.targetFor(sharding.shardForKey(email)) === server) emails.push(email)
  }
  return emails
}

const median = (list: number[]) => {
  const sorted = [...list].sort((x, y) => x - y)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

interface Case {
  readonly orm: OrmName
  readonly rows: number
  readonly direct: number[]
  readonly routed: number[]
  /** This process's CPU time per call (user + system, µs), the median call of each round. */
  readonly cpu: { direct: number[]; routed: number[] }
}

interface Spread {
  readonly orm: OrmName
  readonly rows: Record<string, number>
  readonly inserts: Record<string, number>
}

const loadBefore = loadavg()[0]!
const started = new Date()
log(`Starting three ${dialect} servers (a, b, c)...`)
const servers = await startExampleServers(dialect)
const cases: Case[] = []
const spreads: Spread[] = []
try {
  for (const orm of orms) {
    const database = await servers.database(`bench_${orm.replace('-', '_')}`)
    const source = new InProcessSource({ sharding, shards: 'all' })
    const blog: RoutedBlog = await openBlog(orm, { dialect, urls: database.urls, source })
    try {
      // Users on a (for (a)) and over every server (for (b)).
      const onA = await blog.createUsers(emailsOn('a', 20, 'a-user'))
      const everywhere = await blog.createUsers(emailsOn(undefined, 30, 'any-user'))
      let n = 0
      const posts = (users: string[], count: number): NewPost[] =>
        Array.from({ length: count }, () => {
          n++
          return { userId: users[n % users.length]!, title: `post ${n}` }
        })

      // (a) router overhead, without PostgreSQL's statement log
      await servers.logStatements(false)
      for (const rows of [1, 100]) {
        const calls = rows === 1 ? singles : batches
        const result: Case = { orm, rows, direct: [], routed: [], cpu: { direct: [], routed: [] } }
        const direct = (list: NewPost[]) => blog.createPostsDirect('a', list)
        const routed = (list: NewPost[]) => blog.createPosts(list)
        // A round: `calls` pairs of calls, direct and routed one after the other (which goes
        // first flips with every pair), so both see the same load; each mode's figure is its
        // median call (a stalled call moves a mean, not a median).
        const round = async () => {
          const took = { direct: [] as number[], routed: [] as number[] }
          const cpu = { direct: [] as number[], routed: [] as number[] }
          for (let call = 0; call < calls; call++) {
            const order =
              call % 2 === 0 ? (['direct', 'routed'] as const) : (['routed', 'direct'] as const)
            for (const mode of order) {
              const list = posts(onA, rows)
              const startCpu = process.cpuUsage()
              const start = performance.now()
              await (mode === 'direct' ? direct(list) : routed(list))
              took[mode].push(performance.now() - start)
              const used = process.cpuUsage(startCpu)
              cpu[mode].push(used.user + used.system)
            }
          }
          result.direct.push((rows * 1000) / median(took.direct))
          result.routed.push((rows * 1000) / median(took.routed))
          result.cpu.direct.push(median(cpu.direct))
          result.cpu.routed.push(median(cpu.routed))
        }
        // one warm-up round, not kept
        await round()
        result.direct.length = 0
        result.routed.length = 0
        result.cpu.direct.length = 0
        result.cpu.routed.length = 0
        for (let i = 0; i < rounds; i++) await round()
        cases.push(result)
        const ratios = result.routed.map((value, i) => value / result.direct[i]!)
        log(
          `${orm}, ${rows} row${rows === 1 ? '' : 's'} a call: routed/direct ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(2)}..${Math.max(...ratios).toFixed(2)}), direct ${median(result.direct).toFixed(0)} rows/s; CPU µs a call: direct ${median(result.cpu.direct).toFixed(0)}, routed ${median(result.cpu.routed).toFixed(0)}`,
        )
      }

      // (b) 1000 rows over three servers: INSERTs on each
      await servers.logStatements(true)
      const spread = posts(everywhere, 1000)
      const rowsPerServer: Record<string, number> = { a: 0, b: 0, c: 0 }
      for (const post of spread) {
        rowsPerServer[shardMap.targetFor(sharding.shardOfId(post.userId))]! += 1
      }
      await database.counter.mark()
      await blog.createPosts(spread)
      const counts = await database.counter.since()
      const inserts = Object.fromEntries(
        Object.entries(counts).map(([server, count]) => [server, count.insert]),
      )
      spreads.push({ orm, rows: rowsPerServer, inserts })
      log(
        `${orm}, 1000 rows over three servers: rows ${JSON.stringify(rowsPerServer)}, INSERTs ${JSON.stringify(inserts)}`,
      )
    } finally {
      await blog.close()
      source.close()
      await database.close()
    }
  }
} finally {
  await servers.close()
}
const loadAfter = loadavg()[0]!

const note = [
  `${started.toISOString().slice(0, 10)}, ${dialect}, ${rounds} rounds after a warm-up; a round: ${singles} calls of 1 row, ${batches} calls of 100 rows per mode, alternating; median call`,
  `Load average ${loadBefore.toFixed(1)} at the start, ${loadAfter.toFixed(1)} at the end, on a shared machine`,
]
const results = {
  title: `Routed writes against one server's own handle (${dialect})`,
  unit: 'rows/s',
  note,
  baseline: 'direct',
  rows: cases.flatMap((c) => {
    const group = `${c.orm}, ${c.rows} row${c.rows === 1 ? '' : 's'} a call`
    const round = (list: number[]) => list.map((value) => Number(value.toPrecision(4)))
    return [
      { label: 'direct', group, values: round(c.direct) },
      { label: 'routed', group, values: round(c.routed) },
    ]
  }),
}
if (values.chart) writeFileSync(values.chart, JSON.stringify(results))
const cpu = cases.map((c) => ({
  orm: c.orm,
  rows: c.rows,
  directUs: median(c.cpu.direct),
  routedUs: median(c.cpu.routed),
  rounds: c.cpu,
}))
if (values.json) console.log(JSON.stringify({ ...results, spreads, cpu }, null, 2))
