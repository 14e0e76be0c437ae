/**
 * `pnpm bench` (not a test): what routing costs.
 *
 * (a) Router overhead: the same writes of posts, 1 row and 100 rows a call, through the routed
 *     handles (`shardedDataSources().save`, `shardedClients` `createMany`,
 *     `shardedOrms().createAndFlush`) and straight through server a's own DataSource, client or
 *     MikroORM instance. Every post lives on a, so both write the same rows to the same server;
 *     the routed call adds finding the home and grouping the rows. Modes alternate within each
 *     round (the order flips every round); the ratio is taken within the round; medians and the
 *     smallest and largest round are reported.
 * (b) A 1000-row save spread over the three servers: the INSERT statements each server executed
 *     (its own counters: PostgreSQL's statement log, MariaDB's `Com_insert`).
 *
 * node --experimental-transform-types --import ./src/hooks.ts src/bench.ts
 *   [--dialect=postgres|mariadb] [--orm=typeorm,prisma,mikro-orm] [--rounds=11]
 *   [--single=40] [--batches=4] [--chart <file>] [--json]
 */
import { writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { InProcessSource } from '@shardflake/core'
import { openBlog } from './app.ts'
import { type NewPost, ORMS, type OrmName, type RoutedBlog } from './blog.ts'
import { type ExampleDialect, sharding, shardMap, startExampleServers } from './servers.ts'

const { values } = parseArgs({
  options: {
    dialect: { type: 'string', default: 'postgres' },
    orm: { type: 'string', default: ORMS.join(',') },
    rounds: { type: 'string', default: '7' },
    single: { type: 'string', default: '40' },
    batches: { type: 'string', default: '4' },
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
        const result: Case = { orm, rows, direct: [], routed: [] }
        const time = async (write: (list: NewPost[]) => Promise<unknown>) => {
          const lists = Array.from({ length: calls }, () => posts(onA, rows))
          const start = performance.now()
          for (const list of lists) await write(list)
          return (calls * rows * 1000) / (performance.now() - start)
        }
        const direct = () => time((list) => blog.createPostsDirect('a', list))
        const routed = () => time((list) => blog.createPosts(list))
        // one warm-up round, not kept
        await direct()
        await routed()
        for (let round = 0; round < rounds; round++) {
          if (round % 2 === 0) {
            result.direct.push(await direct())
            result.routed.push(await routed())
          } else {
            result.routed.push(await routed())
            result.direct.push(await direct())
          }
        }
        cases.push(result)
        const ratios = result.routed.map((value, i) => value / result.direct[i]!)
        log(
          `${orm}, ${rows} row${rows === 1 ? '' : 's'} a call: routed/direct ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(2)}..${Math.max(...ratios).toFixed(2)}), direct ${median(result.direct).toFixed(0)} rows/s`,
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
  `${started.toISOString().slice(0, 10)}, ${dialect}, ${rounds} rounds after a warm-up; a round: ${singles} calls of 1 row, ${batches} calls of 100 rows per mode`,
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
if (values.json) console.log(JSON.stringify({ ...results, spreads }, null, 2))
