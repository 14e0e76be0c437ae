/**
 * The same two tables once per key scheme: posts by a user, and comments on a post. With
 * `'sharded'`, keys are `shardedId()` (posts by their user's number, comments on their post's
 * shard); with `'auto'`, `BIGINT` auto-increment keys (`BIGSERIAL`), the baseline. Sequelize
 * needs no decorators, so Node runs this file as it is (type stripping).
 */
import { type ShardedIdRule, shardedId } from '@shardflake/sequelize'
import { DataTypes, type Model, type ModelStatic, type Sequelize } from 'sequelize'

export type Keys = 'auto' | 'sharded'

export interface Blog {
  readonly Post: ModelStatic<Model>
  readonly Comment: ModelStatic<Model>
}

/** Defines `posts_<suffix>` and `comments_<suffix>` on `sequelize`. */
export function defineBlog(sequelize: Sequelize, keys: Keys, suffix: string): Blog {
  const key = (rule: ShardedIdRule) =>
    keys === 'auto'
      ? { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true }
      : shardedId(rule)
  const options = { timestamps: false, underscored: true }
  const Post = sequelize.define(
    `Post_${suffix}`,
    {
      id: key({ shardBy: 'userId' }), // a plain key: the user's number
      userId: { type: DataTypes.BIGINT, allowNull: false },
      title: { type: DataTypes.STRING(200), allowNull: false },
    },
    { ...options, tableName: `posts_${suffix}`, indexes: [{ fields: ['user_id'] }] },
  )
  const Comment = sequelize.define(
    `Comment_${suffix}`,
    {
      id: key({ sameShardAs: 'post' }), // the post's shard, read from its ID
      body: { type: DataTypes.STRING(200), allowNull: false },
    },
    { ...options, tableName: `comments_${suffix}` },
  )
  Post.hasMany(Comment, { as: 'comments', foreignKey: { name: 'postId', allowNull: false } })
  Comment.belongsTo(Post, { as: 'post', foreignKey: { name: 'postId', allowNull: false } })
  return { Post, Comment }
}
