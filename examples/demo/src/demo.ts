/**
 * The quick-start demo: a small sharded blog on an embedded PostgreSQL (PGlite, nothing to
 * install), Instagram's way. Each logical shard is a schema with its own `next_id()`; posts get
 * their IDs from the column DEFAULT, comments get theirs from the application before the INSERT
 * (the ORM path), on their post's shard. Run it with `pnpm demo` from the repository root.
 */
import { PGlite } from '@electric-sql/pglite'
import { defineSharding, InProcessSource, instagram, stringifyIds } from '@shardflake/core'
import { defaultClause, installPostgres, PostgresSource } from '@shardflake/postgres'

// Decided once, at launch, and handed to every source: the layout of the IDs and how many
// logical shards keys are spread over.
const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
const users = [31341n, 42n, 7_000_003n]
const shards = users.map((userId) => sharding.shardForKey(userId)) // Instagram: user_id % 2000

const db = new PGlite()
// One schema per logical shard (shard_1341, shard_42, shard_3), each with next_id() and next_ids(n).
// Shard 7 is left out: the in-process source below makes its IDs.
await installPostgres(db, { sharding, shards })
for (const shard of shards) {
  await db.exec(`
    CREATE TABLE shard_${shard}.posts (id bigint PRIMARY KEY ${defaultClause(shard)}, user_id bigint NOT NULL, title text NOT NULL);
    CREATE TABLE shard_${shard}.comments (id bigint PRIMARY KEY ${defaultClause(shard)}, post_id bigint NOT NULL REFERENCES shard_${shard}.posts, body text NOT NULL);
  `)
}

// Posts: a plain INSERT, the ID comes from DEFAULT shard_<n>.next_id().
const posts: { id: bigint; userId: bigint; title: string }[] = []
for (const [i, userId] of users.entries()) {
  const title = `hello from user ${userId}`
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO shard_${shards[i]}.posts (user_id, title) VALUES ($1, $2) RETURNING id::text`,
    [userId.toString(), title],
  )
  posts.push({ id: BigInt(rows[0]!.id), userId, title })
}

// Comments: IDs fetched first (one round trip per shard, as the ORM adapters do), on the post's
// shard, which is read from the post's ID.
const source = new PostgresSource({ sharding, databases: db })
const comments: { id: bigint; postId: bigint; body: string }[] = []
for (const post of posts) {
  const shard = sharding.shardOfId(post.id)
  const ids = await source.nextIds(shard, 2)
  for (const id of ids) {
    await db.query(`INSERT INTO shard_${shard}.comments (id, post_id, body) VALUES ($1, $2, $3)`, [
      id.toString(),
      post.id.toString(),
      'nice',
    ])
    comments.push({ id, postId: post.id, body: 'nice' })
  }
}

console.log('Posts (ID from the column DEFAULT) and comments (ID made before the INSERT):\n')
for (const row of [...posts, ...comments]) {
  const { timestamp, shard, sequence } = sharding.layout.decompose(row.id)
  const kind = 'title' in row ? 'post   ' : 'comment'
  console.log(
    `  ${kind} ${row.id.toString().padEnd(20)} shard ${String(shard).padStart(4)}  seq ${String(sequence).padStart(4)}  ${timestamp.toISOString()}`,
  )
}

// The database decodes its IDs the same way.
const { rows: decoded } = await db.query<{ shard: number; n: number }>(
  `SELECT shardflake.shardflake_shard(id) AS shard, count(*)::int AS n FROM shard_1341.comments GROUP BY 1`,
)
console.log(
  `\nDecoded in SQL: shard_1341.comments holds ${decoded[0]!.n} rows of shard ${decoded[0]!.shard}.`,
)

const { rows: burst } = await db.query<{ n: number; d: number; asc: boolean }>(
  `SELECT count(*)::int AS n, count(DISTINCT x)::int AS d,
          bool_and(x > coalesce(p, -9223372036854775808)) AS asc
     FROM (SELECT x, lag(x) OVER (ORDER BY o) AS p FROM shard_1341.next_ids(5000) WITH ORDINALITY AS t(x, o)) s`,
)
console.log(
  `5,000 IDs for shard 1341 in one call: ${burst[0]!.d} distinct, ascending: ${burst[0]!.asc}`,
)

// Without a database: the in-process source makes the same kind of IDs for shards that this
// process alone serves (never a shard a database also serves).
const local = new InProcessSource({ sharding, shards: [7] })
const inProcess = local.nextIds(7, 5_000)
local.close()
console.log(
  `In-process, shard 7: ${new Set(inProcess).size} distinct IDs in one call, no database.`,
)
console.log(
  `Capacity of the layout: ${sharding.layout.capacityPerMs} IDs per ms per shard; IDs turn negative in a signed BIGINT on ${sharding.layout.negativeFrom?.toISOString().slice(0, 10)}.`,
)
console.log(`\nAs JSON (IDs as strings, safe for JavaScript clients):\n  ${stringifyIds(posts[0])}`)
await source.close() // leaves alone the database it was given
await db.close()
