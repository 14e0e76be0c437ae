/**
 * 1000-row `save()` calls into an AUTO_INCREMENT (identity on PostgreSQL) table and into a
 * `@ShardedId` table (in-process source, the adapter's defaults), rows/s and the primary key's size.
 *
 *   pnpm --filter @shardflake/typeorm build
 *   node packages/typeorm/bench/bulk-inserts.ts [--db mysql|postgres] [--rounds 7] [--batches 10]
 *     [--rows 1000] [--only sharded|auto] (with `node --cpu-prof`: one table's saves alone)
 *
 * Each round empties both tables and saves `--batches` calls of `--rows` posts into each, the tables
 * taking turns call by call (which goes first alternates between rounds). A table's rows/s is its
 * rows over the time spent in its own `save()` calls; the round's ratio is sharded ÷ baseline. The
 * report gives the median ratio with the smallest and largest round's. Sizes are read after the
 * last round: InnoDB leaf pages of the clustered index (after ANALYZE TABLE), or
 * `pg_relation_size` of the primary key index and of the table (after VACUUM ANALYZE).
 */
import { parseArgs } from 'node:util'
import { allocateAscending, defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { shardedIdColumn, shardedIds } from '@shardflake/typeorm'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { DataSource, EntitySchema } from 'typeorm'

interface PostRow {
  id?: string
  userId: string
  title: string
}

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: 'mysql' },
    rounds: { type: 'string', default: '7' },
    batches: { type: 'string', default: '10' },
    rows: { type: 'string', default: '1000' },
    shards: { type: 'string', default: '16' },
    only: { type: 'string' },
    database: { type: 'string', default: 'h24_ascending_typeorm_bench' },
  },
})
const db = args.db === 'postgres' ? 'postgres' : 'mysql'
const rounds = Number(args.rounds)
const batches = Number(args.batches)
const rowsPerSave = Number(args.rows)
const sharding = defineSharding({ layout: instagram, logicalShards: Number(args.shards) })

const Auto = new EntitySchema<PostRow>({
  name: 'BulkAuto',
  tableName: 'bulk_auto',
  columns: {
    id: { type: 'bigint', primary: true, generated: db === 'mysql' ? 'increment' : 'identity' },
    userId: { type: 'bigint', name: 'user_id' },
    title: { type: 'varchar', length: 200 },
  },
})
const Sharded = new EntitySchema<PostRow>({
  name: 'BulkSharded',
  tableName: 'bulk_sharded',
  columns: {
    id: shardedIdColumn<PostRow>({ shardBy: 'userId' }),
    userId: { type: 'bigint', name: 'user_id' },
    title: { type: 'varchar', length: 200 },
  },
})

/** The same table keyed by IDs the application made beforehand (no subscriber): what TypeORM costs. */
const Given = new EntitySchema<PostRow>({
  name: 'BulkGiven',
  tableName: 'bulk_given',
  columns: {
    id: { type: 'bigint', primary: true },
    userId: { type: 'bigint', name: 'user_id' },
    title: { type: 'varchar', length: 200 },
  },
})

const url = new URL(
  db === 'mysql'
    ? (process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
    : (process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'),
)
async function admin(sql: string): Promise<void> {
  if (db === 'mysql') {
    const connection = await mysql.createConnection({ uri: url.toString() })
    await connection.query(sql)
    await connection.end()
  } else {
    const client = new pg.Client({ connectionString: url.toString() })
    await client.connect()
    await client.query(sql)
    await client.end()
  }
}
await admin(`DROP DATABASE IF EXISTS ${args.database}`)
await admin(`CREATE DATABASE ${args.database}`)
const dbUrl = new URL(url)
dbUrl.pathname = `/${args.database}`

const source = new InProcessSource({ sharding, shards: 'all' })
function open(entity: EntitySchema<PostRow>): DataSource {
  return new DataSource({
    type: db === 'mysql' ? 'mariadb' : 'postgres',
    url: dbUrl.toString(),
    entities: [entity],
    synchronize: true,
    logging: false,
  })
}
const autoDs = open(Auto)
const shardedDs = open(Sharded)
const givenDs = open(Given)
shardedIds(shardedDs, { source })
await autoDs.initialize()
await shardedDs.initialize()
await givenDs.initialize()

let seed = 12_345
const random = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
  return seed
}
const variants = [
  { name: 'auto', dataSource: autoDs, entity: Auto, table: 'bulk_auto' },
  { name: 'sharded', dataSource: shardedDs, entity: Sharded, table: 'bulk_sharded' },
  { name: 'given', dataSource: givenDs, entity: Given, table: 'bulk_given' },
].filter((variant) => !args.only || variant.name === args.only)

const ratios: Record<string, number[]> = { sharded: [], given: [] }
const rates: Record<string, number[]> = { auto: [], sharded: [], given: [] }
let ascendingSaves = 0
let shardedSaves = 0
for (let round = 0; round < rounds; round++) {
  for (const variant of variants) await variant.dataSource.query(`TRUNCATE TABLE ${variant.table}`)
  const spent: Record<string, number> = { auto: 0, sharded: 0, given: 0 }
  for (let b = 0; b < batches; b++) {
    const rows = Array.from({ length: rowsPerSave }, (_, i) => ({
      userId: String(random() % 100_000),
      title: `post ${b * rowsPerSave + i} ${'x'.repeat(random() % 40)}`,
    }))
    // Rotates which table goes first.
    const shift = (round + b) % variants.length
    const order = [...variants.slice(shift), ...variants.slice(0, shift)]
    for (const variant of order) {
      const repository = variant.dataSource.getRepository(variant.entity)
      const posts: PostRow[] = rows.map((row) => ({ ...row }))
      if (variant.name === 'given') {
        // Made before the timed call, ascending when the source has room (as the subscriber does).
        const ids = allocateAscending(
          source,
          posts.map((post) => sharding.shardForKey(post.userId)),
        )
        posts.forEach((post, i) => {
          post.id = ids[i]!.toString()
        })
      }
      const start = process.hrtime.bigint()
      await repository.save(posts)
      spent[variant.name]! += Number(process.hrtime.bigint() - start) / 1e9
      if (variant.name === 'sharded') {
        shardedSaves++
        const ids = posts.map((post) => BigInt(post.id!))
        if (ids.every((id, i) => i === 0 || id > ids[i - 1]!)) ascendingSaves++
      }
    }
  }
  for (const variant of variants) {
    rates[variant.name]!.push((batches * rowsPerSave) / spent[variant.name]!)
  }
  if (rates.auto!.length) {
    for (const name of ['sharded', 'given']) {
      if (rates[name]!.length) ratios[name]!.push(rates[name]!.at(-1)! / rates.auto!.at(-1)!)
    }
  }
}

const sizes: Record<string, Record<string, number>> = {}
for (const variant of variants) {
  const ds = variant.dataSource
  if (db === 'mysql') {
    await ds.query(`ANALYZE TABLE ${variant.table} PERSISTENT FOR ALL`)
    const stat = async (name: string) =>
      Number(
        (
          await ds.query(
            `SELECT stat_value AS v FROM mysql.innodb_index_stats WHERE database_name = DATABASE() AND table_name = ? AND index_name = 'PRIMARY' AND stat_name = ?`,
            [variant.table, name],
          )
        )[0]?.v,
      )
    const [size] = await ds.query(
      'SELECT data_length AS d, index_length AS i FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = ?',
      [variant.table],
    )
    sizes[variant.name] = {
      leafPages: await stat('n_leaf_pages'),
      dataBytes: Number(size.d),
      indexBytes: Number(size.i),
    }
  } else {
    await ds.query(`VACUUM ANALYZE ${variant.table}`)
    const [size] = await ds.query(
      `SELECT pg_relation_size(i.indexrelid) AS pk, pg_relation_size(i.indrelid) AS t FROM pg_index i WHERE i.indrelid = $1::regclass AND i.indisprimary`,
      [variant.table],
    )
    sizes[variant.name] = { pkIndexBytes: Number(size.pk), tableBytes: Number(size.t) }
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
console.log(
  JSON.stringify(
    {
      orm: 'typeorm',
      db,
      rounds,
      batches,
      rowsPerSave,
      ratioToAuto: Object.fromEntries(
        Object.entries(ratios)
          .filter(([, list]) => list.length)
          .map(([name, list]) => [
            name,
            { median: median(list), min: Math.min(...list), max: Math.max(...list), rounds: list },
          ]),
      ),
      rowsPerSecond: Object.fromEntries(
        Object.entries(rates)
          .filter(([, list]) => list.length)
          .map(([name, list]) => [name, Math.round(median(list))]),
      ),
      ascendingSaves: `${ascendingSaves} of ${shardedSaves}`,
      sizes,
    },
    null,
    2,
  ),
)
await autoDs.destroy()
await shardedDs.destroy()
await givenDs.destroy()
source.close()
await admin(`DROP DATABASE IF EXISTS ${args.database}`)
