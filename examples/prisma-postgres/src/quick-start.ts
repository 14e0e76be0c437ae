import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { PrismaClient } from './generated/prisma/client.ts'
import { shardedIds } from './generated/shardflake/index.ts'

// One sharding for the application: every source and adapter gets this same object.
const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
// This process makes the IDs of every logical shard: no other process or database may.
const source = new InProcessSource({ sharding, shards: 'all' })

import { PrismaPg } from '@prisma/adapter-pg'

const adapter = new PrismaPg({ connectionString: process.env.DATABASE_URL })

const prisma = new PrismaClient({ adapter }).$extends(shardedIds({ source }))

const user = await prisma.user.create({ data: { email: 'ada@example.com' } })
const post = await prisma.post.create({
  data: { userId: user.id, title: 'hello', comments: { create: [{ body: 'first!' }] } },
  include: { comments: true },
})
// The user is on the shard of its email's hash; its post and the post's comment are with it.
console.log([user.id, post.id, post.comments[0]!.id].map((id) => sharding.shardOfId(id)))

await prisma.$disconnect()
source.close()
