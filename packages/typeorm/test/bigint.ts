/**
 * `idType: 'bigint'` with loaded entities: TypeORM hashes the key values of loaded relations
 * with JSON.stringify, which throws on a bigint. Registers the tests; `tag` keeps each TypeORM
 * major's databases apart.
 */
import {
  blogSchemaSql,
  type Dialect,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { DataSource } from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedIds } from '../src'
import { Author, CommentByColumn, dataSourceOptions, PostByColumn } from './blog'

export function describeBigint(tag: string): void {
  const sharding = testSharding()

  for (const dialect of ['postgres', 'mysql'] as const satisfies readonly Dialect[]) {
    describe(`idType bigint with loaded entities on ${dialect}`, () => {
      let raw: RawDatabase
      let source: InProcessSource
      let dataSource: DataSource
      let post: PostByColumn

      beforeAll(async () => {
        raw = await freshDatabase(dialect, `sf_typeorm_${tag}bigint_${dialect.slice(0, 2)}`)
        for (const statement of blogSchemaSql(dialect)) await raw.query(statement)
        source = new InProcessSource({ sharding, shards: 'all' })
        dataSource = new DataSource(dataSourceOptions(raw, [Author, PostByColumn, CommentByColumn]))
        shardedIds(dataSource, { source, idType: 'bigint' })
        await dataSource.initialize()
        const author = await dataSource
          .getRepository(Author)
          .save(Object.assign(new Author(), { email: 'big@example.com' }))
        post = await dataSource.getRepository(PostByColumn).save(
          Object.assign(new PostByColumn(), {
            author,
            title: 'big',
            comments: [Object.assign(new CommentByColumn(), { body: 'first' })],
          }),
        )
      })

      afterAll(async () => {
        await dataSource?.destroy()
        source?.close()
        await raw?.close()
      })

      const loadPost = () =>
        dataSource
          .getRepository(PostByColumn)
          .findOneOrFail({ where: { id: post.id }, relations: { comments: true } })

      it('loads keys and the foreign keys holding them as bigint', async () => {
        const loaded = await loadPost()
        expect(typeof loaded.id).toBe('bigint')
        expect(typeof loaded.authorId).toBe('bigint')
        expect(typeof loaded.comments![0]!.id).toBe('bigint')
        expect(typeof loaded.comments![0]!.postId).toBe('bigint')
      })

      it('saves an entity loaded with its one-to-many relation', async () => {
        const loaded = await loadPost()
        loaded.title = 'big, renamed'
        await dataSource.getRepository(PostByColumn).save(loaded)
        const [row] = await raw.query(
          `SELECT title FROM posts WHERE id = ${dialect === 'postgres' ? '$1' : '?'}`,
          [String(post.id)],
        )
        expect(row?.title).toBe('big, renamed')
      })

      it('saves a child cascading to an existing, loaded parent, on the parent’s shard', async () => {
        const loaded = await loadPost()
        const child = await dataSource
          .getRepository(CommentByColumn)
          .save(Object.assign(new CommentByColumn(), { body: 'cascading up', post: loaded }))
        expect(typeof child.id).toBe('bigint')
        expect(sharding.shardOfId(child.id!)).toBe(sharding.shardOfId(post.id!))
        const again = await loadPost()
        expect(again.comments!.map((comment) => comment.body).sort()).toEqual([
          'cascading up',
          'first',
        ])
      })
    })
  }
}
