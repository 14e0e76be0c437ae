import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { shardedId, shardedIds } from '@shardflake/drizzle'
import { drizzle } from 'drizzle-orm/node-postgres'
import { bigint, pgTable, text } from 'drizzle-orm/pg-core'
import pg from 'pg'

// The schema (usually a module of its own). A user lives on the shard of its email's hash;
// its posts, and their comments, live with it.
const users = pgTable('users', {
  id: shardedId(bigint({ mode: 'bigint' }), { shardBy: 'email' }).primaryKey(),
  email: text().notNull().unique(),
})
const posts = pgTable('posts', {
  id: shardedId(bigint({ mode: 'bigint' }), { sameShardAs: 'userId' }).primaryKey(),
  userId: bigint('user_id', { mode: 'bigint' })
    .notNull()
    .references(() => users.id),
  title: text().notNull(),
})
const comments = pgTable('comments', {
  id: shardedId(bigint({ mode: 'bigint' }), { sameShardAs: 'postId' }).primaryKey(),
  postId: bigint('post_id', { mode: 'bigint' })
    .notNull()
    .references(() => posts.id),
  body: text().notNull(),
})

// Decided once for the application and handed to every source: the layout of the IDs and how
// many logical shards keys are spread over.
const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
// This process makes the IDs of every logical shard: no other process or database may.
const source = new InProcessSource({ sharding, shards: 'all' })
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
const db = drizzle({ client: pool })
// Checks every shardedId() column of the schema, then gives them the source.
const ids = shardedIds(db, { source, schema: { users, posts, comments } })

// Rows get their IDs before the INSERT, by their table's rule: one source call per shard.
const user = await ids.assign(users, { email: 'ada@example.com' })
await db.insert(users).values(user)
const post = await ids.assign(posts, { userId: user.id!, title: 'hello' })
const replies = await ids.assign(comments, [
  { postId: post.id!, body: 'first!' },
  { postId: post.id!, body: 'second' },
])
await db.transaction(async (tx) => {
  await tx.insert(posts).values(post)
  await tx.insert(comments).values(replies)
})
// The user is on the shard of its email's hash; its post and the post's comments are with it.
const written = [user, post, ...replies].map((row) => row.id!)
console.log(written.map((id) => sharding.shardOfId(id)))

await pool.end()
await source.close()
