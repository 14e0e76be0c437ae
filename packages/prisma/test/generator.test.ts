/** The generator, run by `prisma generate` (from source) on real schemas. */
import { readFile } from 'node:fs/promises'
import { PrismaPg } from '@prisma/adapter-pg'
import { InProcessSource, instagram } from '@shardflake/core'
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
        rule: { shardBy: 'authorId' },
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
    })
    expect(mysqlModels).toEqual(models)
  })

  it('writes shardedIds with the models bound, the same extension as passing them', async () => {
    const { shardedIds: bound } = await import('../generated/pg/shardflake')
    const source = new InProcessSource({ layout: instagram, shards: 'all', logicalShards: 2000 })
    const client = new PgClient({
      adapter: new PrismaPg({ connectionString: 'postgres://unused@127.0.0.1:1/none' }),
    }).$extends(bound({ source }))
    expect(client.$shardedIds.models).toBe(models)
    const [row] = await client.$shardedIds.assign('Post', [{ authorId: 31341n, title: 't' }])
    expect(instagram.shardOf(row!.id)).toBe(31341 % 2000)
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
    const schema = `${generator()}
model Item {
  /// @shardedId(shardBy: key)
  ${fields}
}`
    const error = await prismaGenerate(`gen-bad-${folder}`, schema).catch(
      (caught: { stderr?: string }) => caught,
    )
    expect(
      typeof error === 'object' && error !== null && 'stderr' in error ? error.stderr : '',
    ).toMatch(message)
  })
})
