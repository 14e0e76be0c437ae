/**
 * The quick-start demo: makes IDs for a small sharded blog with the in-process source and shows
 * what is inside them. Run it with `pnpm demo` from the repository root.
 */
import { InProcessSource, instagram, integerShard, stringifyIds } from '@shardflake/core'

const logicalShards = 2000
const source = new InProcessSource({ layout: instagram, shards: 'all', logicalShards })

const users = [31341n, 42n, 7_000_003n]
const posts = users.map((userId) => {
  const shard = integerShard(userId, logicalShards) // Instagram: user_id % 2000
  return { id: source.nextId(shard), userId, title: `hello from user ${userId}` }
})
// A comment lives on its post's shard: read the shard from the post's ID.
const comments = posts.map((post) => ({
  id: source.nextId(instagram.shardOf(post.id)),
  postId: post.id,
  body: 'nice',
}))

console.log('Posts and comments, each with a 64-bit ID made before any INSERT:\n')
for (const row of [...posts, ...comments]) {
  const { timestamp, shard, sequence } = instagram.decompose(row.id)
  console.log(
    `  ${row.id.toString().padEnd(20)} shard ${String(shard).padStart(4)}  seq ${String(sequence).padStart(4)}  ${timestamp.toISOString()}`,
  )
}

const burst = source.nextIds(1341, 5_000)
console.log(
  `\n5,000 IDs for shard 1341 in one call: ${new Set(burst).size} distinct, ascending: ${burst.every((id, i) => i === 0 || id > burst[i - 1]!)}`,
)
console.log(
  `Capacity of the layout: ${instagram.capacityPerMs} IDs per ms per shard; IDs turn negative in a signed BIGINT on ${instagram.negativeFrom?.toISOString().slice(0, 10)}.`,
)
console.log(`\nAs JSON (IDs as strings, safe for JavaScript clients):\n  ${stringifyIds(posts[0])}`)
