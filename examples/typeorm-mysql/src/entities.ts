/**
 * Two posts tables of the same shape: BIGINT primary key, the author, a title and an index on
 * the author. One gets its key from shardflake before the INSERT, the other from the
 * database (AUTO_INCREMENT on MySQL/MariaDB, an identity sequence on PostgreSQL).
 */
import { ShardedId } from '@shardflake/typeorm'
import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm'

@Entity('posts_sharded')
@Index(['userId'])
export class ShardedPost {
  /**
   * On the shard of its author (`user_id % logicalShards`: the user number is a plain key here,
   * users are not sharded rows), assigned before the INSERT.
   */
  @ShardedId<ShardedPost>({ shardBy: 'userId' })
  id?: string

  @Column({ type: 'bigint', name: 'user_id' })
  userId!: string

  @Column({ type: 'varchar', length: 200 })
  title!: string
}

@Entity('posts_auto')
@Index(['userId'])
export class AutoPost {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id?: string

  @Column({ type: 'bigint', name: 'user_id' })
  userId!: string

  @Column({ type: 'varchar', length: 200 })
  title!: string
}

/** `posts_sharded` again, for the run whose `MysqlSource` prefetches IDs (its own DataSource). */
@Entity('posts_sharded_prefetch')
@Index(['userId'])
export class PrefetchedPost {
  @ShardedId<PrefetchedPost>({ shardBy: 'userId' })
  id?: string

  @Column({ type: 'bigint', name: 'user_id' })
  userId!: string

  @Column({ type: 'varchar', length: 200 })
  title!: string
}

/** `posts_sharded` again, for the MySQL run with the in-process source (no round trip at all). */
@Entity('posts_sharded_inproc')
@Index(['userId'])
export class InProcessPost {
  @ShardedId<InProcessPost>({ shardBy: 'userId' })
  id?: string

  @Column({ type: 'bigint', name: 'user_id' })
  userId!: string

  @Column({ type: 'varchar', length: 200 })
  title!: string
}

/** A comment on a sharded post, on the post's shard: `sameShardAs` the post relation. */
@Entity('comments_sharded')
export class ShardedComment {
  @ShardedId<ShardedComment>({ sameShardAs: 'post' })
  id?: string

  @ManyToOne(() => ShardedPost, { cascade: ['insert'] })
  @JoinColumn({ name: 'post_id' })
  post!: ShardedPost

  @Column({ type: 'varchar', length: 200 })
  body!: string
}
