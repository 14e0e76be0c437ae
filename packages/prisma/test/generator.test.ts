/** The generator, run by `prisma generate` (from source) on real schemas. */
import { readFile } from 'node:fs/promises'
import { PrismaPg } from '@prisma/adapter-pg'
import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { describe, expect, it } from 'vitest'
import { models as mysqlModels } from '../generated/mysql/shardflake'
import { PrismaClient as PgClient } from '../generated/pg/client/client'
import { models } from '../generated/pg/shardflake'
import { generatorFromSource, prismaGenerate } from './global-setup'

const generator = (extra = '') => `
generator shardflake {
  provider = "${generatorFromSource}"
  output   = "./shardflake"
  ${extra}
}
datasource db {
  provider = "postgresql"
}
`

describe('the shardflake generator', () => {
  it('writes the rules and relations of the blog schema', () => {
    expect(models).toEqual({
      Author: {
        id: 'id',
        rule: { shardBy: 'email' },
        relations: {
          posts: { model: 'Post', list: true, relationName: 'AuthorToPost' },
          profile: { model: 'Profile', relationName: 'AuthorToProfile' },
        },
      },
      Post: {
        id: 'id',
        // `sameShardAs: author` names the relation: its foreign key is used
        rule: { sameShardAs: 'authorId' },
        relations: {
          author: {
            model: 'Author',
            relationName: 'AuthorToPost',
            fields: ['authorId'],
            references: ['id'],
          },
          comments: { model: 'Comment', list: true, relationName: 'CommentToPost' },
        },
      },
      Comment: {
        id: 'id',
        rule: { sameShardAs: 'postId' },
        relations: {
          post: {
            model: 'Post',
            relationName: 'CommentToPost',
            fields: ['postId'],
            references: ['id'],
          },
        },
      },
      Profile: {
        id: 'id',
        // `sameShardAs: author` names the relation: its foreign key is used
        rule: { sameShardAs: 'authorId' },
        relations: {
          author: {
            model: 'Author',
            relationName: 'AuthorToProfile',
            fields: ['authorId'],
            references: ['id'],
          },
        },
      },
      Keyed: { id: 'id', rule: { shardBy: 'shardKey' }, relations: {} },
      Tagged: { id: 'id', rule: { shardBy: 'tenant', shardColumn: 'lshard' }, relations: {} },
      Member: { id: 'id', rule: { shardBy: 'tenant' }, relations: {} },
    })
    expect(mysqlModels).toEqual(models)
  })

  it('writes shardedIds with the models bound, the same extension as passing them', async () => {
    const { shardedIds: bound } = await import('../generated/pg/shardflake')
    const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
    const source = new InProcessSource({ sharding, shards: 'all' })
    const client = new PgClient({
      adapter: new PrismaPg({ connectionString: 'postgres://unused@127.0.0.1:1/none' }),
    }).$extends(bound({ source }))
    try {
      expect(client.$shardedIds.models).toEqual(models)
      const author = sharding.layout.compose({ timestamp: Date.now(), shard: 1341, sequence: 5 })
      const [post] = await client.$shardedIds.assign('Post', [{ authorId: author, title: 't' }])
      expect(sharding.shardOfId(post!.id)).toBe(1341)
      const [keyed] = await client.$shardedIds.assign('Keyed', [{ shardKey: '31341' }])
      expect(sharding.shardOfId(keyed!.id)).toBe(31341 % 2000)
    } finally {
      source.close()
    }
  })

  it('lists models without a sharded ID with their relations, and writes JS with format = "js"', async () => {
    const dir = await prismaGenerate(
      'gen-js',
      `${generator('format = "js"')}
model Tag {
  id    Int    @id @default(autoincrement())
  users User[]
}
model User {
  /// @shardedId(shardBy: zip, stringKeys: hash)
  id   BigInt @id
  zip  String
  tags Tag[]
}`,
    )
    const written: { models: unknown } = await import(`${dir}/shardflake/index.js`)
    expect(written.models).toEqual({
      Tag: { relations: { users: { model: 'User', list: true, relationName: 'TagToUser' } } },
      User: {
        id: 'id',
        rule: { shardBy: 'zip', stringKeys: 'hash' },
        relations: { tags: { model: 'Tag', list: true, relationName: 'TagToUser' } },
      },
    })
    const dts = await readFile(`${dir}/shardflake/index.d.ts`, 'utf8')
    expect(dts).toContain('export declare const models:')
    expect(dts).toContain('export declare function shardedIds(')
    expect(await readFile(`${dir}/shardflake/index.js`, 'utf8')).toContain(
      'import { shardedIds as withModels } from "@shardflake/prisma"',
    )
  })

  const failure = async (folder: string, models: string) => {
    const error = await prismaGenerate(`gen-bad-${folder}`, `${generator()}\n${models}`).then(
      () => undefined,
      (caught: { stderr?: string }) => caught,
    )
    expect(error, 'prisma generate must fail').toBeDefined()
    return error?.stderr ?? ''
  }

  it.each([
    ['a field that is not BigInt', 'type', 'id String @id\n  key String', /goes on a BigInt field/],
    [
      'a field that does not exist',
      'missing',
      'id BigInt @id',
      /names 'key', which Item does not have/,
    ],
    ['a Float key', 'float', 'id BigInt @id\n  key Float', /shard keys are BigInt, Int or String/],
  ])('fails prisma generate for @shardedId on %s', async (_, folder, fields, message) => {
    const stderr = await failure(
      folder,
      `model Item {\n  /// @shardedId(shardBy: key)\n  ${fields}\n}`,
    )
    expect(stderr).toMatch(message)
  })

  const users = `model User {
  /// @shardedId(shardBy: email)
  id    BigInt @id
  email String
  posts Post[]
}`
  const post = (annotation: string) => `model Post {
  ${annotation}
  id     BigInt @id
  userId BigInt
  user   User   @relation(fields: [userId], references: [id])
}`

  it.each([
    ['the foreign key', 'fk', 'userId'],
    ['the relation', 'relation', 'user'],
  ])(
    'refuses shardBy on %s of a sharded parent, naming sameShardAs: user',
    async (_, folder, ref) => {
      const stderr = await failure(
        `shardby-${folder}`,
        `${users}\n${post(`/// @shardedId(shardBy: ${ref})`)}`,
      )
      expect(stderr).toContain('InvalidShardRuleError (INVALID_SHARD_RULE)')
      expect(stderr).toContain(`Post: shardBy '${ref}' holds the ID of User`)
      expect(stderr).toContain("use { sameShardAs: 'user' }")
    },
  )

  it('refuses sameShardAs on a field that cannot hold a sharded ID', async () => {
    const stderr = await failure(
      'same-int',
      'model Item {\n  /// @shardedId(sameShardAs: parentId)\n  id BigInt @id\n  parentId Int\n}',
    )
    expect(stderr).toContain(
      "Item: sameShardAs 'parentId' is a Int; it must hold a parent's sharded ID",
    )
  })

  it('refuses a shardColumn the model does not have, or that is not an Int', async () => {
    const missing = await failure(
      'column-missing',
      'model Item {\n  /// @shardedId(shardBy: tenant, shardColumn: lshrad)\n  id BigInt @id\n  tenant String\n  lshard Int\n}',
    )
    expect(missing).toContain("shardColumn 'lshrad', which Item does not have")
    const text = await failure(
      'column-text',
      'model Item {\n  /// @shardedId(shardBy: tenant, shardColumn: lshard)\n  id BigInt @id\n  tenant String\n  lshard String\n}',
    )
    expect(text).toContain("shardColumn 'lshard' is a String")
  })

  it('refuses sameShardAs towards a model whose ID is not sharded', async () => {
    const stderr = await failure(
      'same-plain',
      `model User {\n  id Int @id\n  posts Post[]\n}\nmodel Post {\n  /// @shardedId(sameShardAs: user)\n  id BigInt @id\n  userId Int\n  user User @relation(fields: [userId], references: [id])\n}`,
    )
    expect(stderr).toContain("Post: sameShardAs 'user' reads the shard from User's ID")
    expect(stderr).toContain('User has no sharded ID')
  })

  it.each([
    ['/// @shardedid(shardBy: email)', 'lowercase', /unknown annotation @shardedid/],
    ['/// @shardedIds(shardBy: email)', 'plural', /unknown annotation @shardedIds/],
    ['// @shardedId(shardBy: email)', 'plain-comment', /is a \/\/ comment, which Prisma ignores/],
    ['/// @shardedId(shardby: email)', 'argument', /unknown shardby in @shardedId/],
    ['/// @shardedId(shardBy: email, shard: 1)', 'two-rules', /needs exactly one of/],
  ])('fails prisma generate for the typo %s', async (annotation, folder, message) => {
    const stderr = await failure(
      `typo-${folder}`,
      `model User {\n  ${annotation}\n  id    BigInt @id\n  email String\n}`,
    )
    expect(stderr).toContain('InvalidShardRuleError')
    expect(stderr).toMatch(message)
  })
})
