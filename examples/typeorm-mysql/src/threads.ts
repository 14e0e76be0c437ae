/**
 * Posts with comments, written the way an application writes them: comments `sameShardAs` their
 * post, so a thread lives on one shard and the shard of each row can be read from its ID.
 */
import { shardedIds } from '@shardflake/typeorm'
import { DataSource } from 'typeorm'
import { type BenchmarkConfig, defaults, userIds } from './benchmark.ts'
import { ShardedComment, ShardedPost } from './entities.ts'
import { setupMysql, setupPostgres } from './setup.ts'

/**
 * Writes `posts` posts of `config.users` authors, each with three comments saved in one call
 * (cascading to the new post) and a fourth saved later against the loaded post, through the
 * first sharded source of the run. Leaves the tables in `config.database`.
 */
export async function writeThreads(options: Partial<BenchmarkConfig>, posts = 20): Promise<void> {
  const config: BenchmarkConfig = { ...defaults, ...options, prefetch: 0, inProcess: false }
  const setup = config.db === 'mysql' ? await setupMysql(config) : await setupPostgres(config)
  const dataSource = new DataSource({
    ...setup.options,
    entities: [ShardedPost, ShardedComment],
    synchronize: true,
  })
  shardedIds(dataSource, { source: setup.variants[1]!.source! })
  await dataSource.initialize()
  try {
    const users = userIds(config.users)
    const comments = dataSource.getRepository(ShardedComment)
    for (let i = 0; i < posts; i++) {
      const post = Object.assign(new ShardedPost(), {
        userId: users[i % users.length]!,
        title: `thread ${i}`,
      })
      const first = ['first', 'second', 'third'].map((body) =>
        Object.assign(new ShardedComment(), { post, body }),
      )
      await comments.save(first) // inserts the post, then its comments on its shard
      const loaded = await dataSource.getRepository(ShardedPost).findOneByOrFail({ id: post.id! })
      await comments.save(Object.assign(new ShardedComment(), { post: loaded, body: 'later' }))
    }
  } finally {
    await dataSource.destroy()
    await setup.close()
  }
}
