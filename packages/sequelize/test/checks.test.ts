/**
 * What is refused, typed, before any row is written: malformed rules and key attributes when the
 * model is defined, rules that name the wrong thing as soon as Sequelize shows it (definition,
 * installation, sync, first write), misused options, and database settings that would lose
 * precision or let a key-less INSERT through.
 */
import { freshDatabase, testSharding } from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidArgumentError,
  InvalidShardRuleError,
  ShardConflictError,
  ShardOutOfRangeError,
} from '@shardflake/core'
import pg from 'pg'
import { DataTypes, Sequelize } from 'sequelize'
import { afterAll, describe, expect, it } from 'vitest'
import { type ShardedIdRule, shardedId, shardedIds } from '../src'
import { sequelizeOn } from './support/blog'

const sharding = testSharding(64)
const source = new InProcessSource({ sharding, shards: 'all' })
afterAll(() => source.close())
const common = { timestamps: false }

/** A Sequelize instance that never connects (definitions only) with shardedIds() installed. */
function offline(): Sequelize {
  const sequelize = new Sequelize('postgres://nobody@127.0.0.1:1/none', { logging: false })
  shardedIds(sequelize, { source })
  return sequelize
}

describe('shardedId()', () => {
  it('refuses a malformed rule with InvalidShardRuleError', () => {
    expect(() => shardedId({} as never)).toThrow(InvalidShardRuleError)
    expect(() => shardedId({ shardBy: '' })).toThrow(InvalidShardRuleError)
    expect(() => shardedId({ shardBy: 'a', shard: 1 } as never)).toThrow(InvalidShardRuleError)
    expect(() => shardedId({ shard: -1 })).toThrow(InvalidShardRuleError)
  })

  it('is a BIGINT primary key with the rule, no default and no allowNull: false', () => {
    const attribute = shardedId({ shardBy: 'email' })
    expect(attribute.type).toBe(DataTypes.BIGINT)
    expect(attribute.primaryKey).toBe(true)
    expect(attribute.defaultValue).toBeUndefined()
    expect(attribute.allowNull).toBeUndefined()
  })
})

/**
 * Sequelize runs its definition hooks in a promise nobody awaits (a throw there would be an
 * unhandled rejection), so a model defined after shardedIds() is refused at sync() and at its
 * first write, and one defined before, when shardedIds() is installed.
 */
describe('key attributes', () => {
  const refusals: [string, Record<string, unknown>, new (...args: never[]) => Error, RegExp][] = [
    ['allowNull: false', { allowNull: false }, ConfigurationError, /allowNull/],
    ['a defaultValue', { defaultValue: () => 1n }, ConfigurationError, /defaultValue/],
    ['autoIncrement', { autoIncrement: true }, ConfigurationError, /autoIncrement/],
    ['an INTEGER column', { type: DataTypes.INTEGER }, ConfigurationError, /64-bit/],
    ['primaryKey: false', { primaryKey: false }, ConfigurationError, /primary key/],
  ]
  for (const [what, options, type, message] of refusals) {
    it(`refuses a sharded key with ${what} at sync, at the first create and at installation`, async () => {
      // Named `key`: Sequelize itself refuses an `id` that is not a primary key.
      const define = (sequelize: Sequelize) =>
        sequelize.define(
          'Thing',
          { key: { ...shardedId({ shardBy: 'name' }), ...options }, name: DataTypes.STRING },
          common,
        )
      const later = offline()
      const Thing = define(later)
      await expect(later.sync()).rejects.toThrow(type)
      await expect(Thing.create({ name: 'x' })).rejects.toThrow(message)
      const before = new Sequelize('postgres://nobody@127.0.0.1:1/none', { logging: false })
      define(before)
      expect(() => shardedIds(before, { source })).toThrow(message)
    })
  }

  it('refuses a composite primary key', async () => {
    const sequelize = offline()
    sequelize.define(
      'Pair',
      { id: shardedId({ shard: 1 }), other: { type: DataTypes.INTEGER, primaryKey: true } },
      common,
    )
    await expect(sequelize.sync()).rejects.toThrow(ConfigurationError)
  })

  it('refuses a fixed shard outside the logical shards', async () => {
    const sequelize = offline()
    const Audit = sequelize.define(
      'Audit',
      { id: shardedId({ shard: 64 }), body: DataTypes.STRING },
      common,
    )
    await expect(Audit.create({ body: 'x' })).rejects.toThrow(ShardOutOfRangeError)
  })

  it('refuses shardBy on an attribute that references a model with a sharded ID, naming sameShardAs', async () => {
    const sequelize = offline()
    const Author = sequelize.define(
      'Author',
      { id: shardedId({ shardBy: 'email' }), email: DataTypes.STRING },
      common,
    )
    const Post = sequelize.define(
      'Post',
      {
        id: shardedId({ shardBy: 'authorId' }),
        authorId: { type: DataTypes.BIGINT, references: { model: Author, key: 'id' } },
      },
      common,
    )
    await expect(Post.create({ authorId: '1' })).rejects.toThrow(/sameShardAs: 'authorId'/)
  })
})

describe('rules against associations', () => {
  /** Authors and posts; the post's rule is `rule`; associations declared after the models. */
  function blog(rule: ShardedIdRule, sharded = true) {
    const sequelize = offline()
    const Author = sequelize.define(
      'Author',
      {
        id: sharded
          ? shardedId({ shardBy: 'email' })
          : { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true },
        email: DataTypes.STRING,
        handle: { type: DataTypes.STRING, unique: true },
      },
      common,
    )
    const Post = sequelize.define('Post', { id: shardedId(rule), title: DataTypes.STRING }, common)
    return { sequelize, Author, Post }
  }

  it('refuses shardBy on a belongsTo foreign key to a sharded model at sync and at the first create, before writing', async () => {
    const { sequelize, Author, Post } = blog({ shardBy: 'authorId' })
    Post.belongsTo(Author, { as: 'author', foreignKey: 'authorId' })
    await expect(sequelize.sync()).rejects.toThrow(InvalidShardRuleError)
    await expect(Post.create({ authorId: '1', title: 'x' })).rejects.toThrow(
      /use \{ sameShardAs: 'author' \}/,
    )
  })

  it('refuses shardBy on the foreign key a hasMany of the parent injects', async () => {
    const { sequelize, Author, Post } = blog({ shardBy: 'authorId' })
    Author.hasMany(Post, { foreignKey: 'authorId' })
    await expect(sequelize.sync()).rejects.toThrow(/sameShardAs/)
  })

  it('refuses shardBy on an association, and on associations declared before shardedIds()', () => {
    const sequelize = new Sequelize('postgres://nobody@127.0.0.1:1/none', { logging: false })
    const Author = sequelize.define(
      'Author',
      { id: shardedId({ shardBy: 'email' }), email: DataTypes.STRING },
      common,
    )
    const Post = sequelize.define(
      'Post',
      { id: shardedId({ shardBy: 'author' }), title: DataTypes.STRING },
      common,
    )
    Post.belongsTo(Author, { as: 'author' })
    expect(() => shardedIds(sequelize, { source })).toThrow(/names an association/)
  })

  it('refuses sameShardAs towards a model whose key is not sharded, a hasMany, or a belongsTo by another key', async () => {
    const plain = blog({ sameShardAs: 'author' }, false)
    plain.Post.belongsTo(plain.Author, { as: 'author', foreignKey: 'authorId' })
    await expect(plain.sequelize.sync()).rejects.toThrow(/no shard to share/)

    const many = blog({ sameShardAs: 'authors' })
    many.Post.hasMany(many.Author, { as: 'authors' })
    await expect(many.sequelize.sync()).rejects.toThrow(/HasMany/)

    const byHandle = blog({ sameShardAs: 'author' })
    byHandle.Post.belongsTo(byHandle.Author, { as: 'author', targetKey: 'handle' })
    await expect(byHandle.sequelize.sync()).rejects.toThrow(/targetKey|handle/)
  })

  it('accepts a rule naming what does not exist yet at definition, refuses it at sync', async () => {
    const { sequelize } = blog({ sameShardAs: 'author' })
    await expect(sequelize.sync()).rejects.toThrow(/names no attribute or association/)
  })
})

describe('shardedIds()', () => {
  it('refuses a second installation on one Sequelize instance', () => {
    const sequelize = offline()
    expect(() => shardedIds(sequelize, { source })).toThrow(ShardConflictError)
  })

  it('refuses a misspelled option, naming the closest, and a missing source', () => {
    const sequelize = new Sequelize('postgres://nobody@127.0.0.1:1/none', { logging: false })
    expect(() => shardedIds(sequelize, { sorce: source } as never)).toThrow(InvalidArgumentError)
    expect(() => shardedIds(sequelize, { sorce: source } as never)).toThrow(/Did you mean "source"/)
    expect(() => shardedIds(sequelize, {} as never)).toThrow(ConfigurationError)
    expect(() => shardedIds({} as never, { source })).toThrow(ConfigurationError)
  })
})

describe('before the first write', () => {
  it('refuses a pg type parser that turns BIGINT into numbers (PostgreSQL)', async () => {
    const raw = await freshDatabase('postgres', 'sf_sqlz_lossy_pg')
    const original = pg.types.getTypeParser(20, 'text')
    const sequelize = sequelizeOn(raw)
    try {
      shardedIds(sequelize, { source })
      const Thing = sequelize.define(
        'Thing',
        { id: shardedId({ shard: 1 }), name: DataTypes.STRING },
        common,
      )
      await Thing.sync()
      pg.types.setTypeParser(20, Number)
      await expect(Thing.create({ name: 'lossy' })).rejects.toThrow(/parseInt8|type parser/)
      pg.types.setTypeParser(20, original)
      expect(await raw.query('SELECT id FROM "Things"')).toHaveLength(0)
      await Thing.create({ name: 'exact' })
      expect(await raw.query('SELECT id FROM "Things"')).toHaveLength(1)
    } finally {
      pg.types.setTypeParser(20, original)
      await sequelize.close()
      await raw.close()
    }
  })

  it('refuses supportBigNumbers: false and a session that is not strict (MariaDB)', async () => {
    const raw = await freshDatabase('mysql', 'sf_sqlz_lossy_my')
    const url = new URL(raw.url)
    const open = (options: object) =>
      new Sequelize(url.pathname.slice(1), 'root', '', {
        dialect: 'mysql',
        host: url.hostname,
        port: Number(url.port),
        logging: false,
        ...options,
      })
    const lossy = open({ dialectOptions: { supportBigNumbers: false } })
    const loose = open({
      hooks: {
        afterConnect: (connection: { promise(): { query(sql: string): Promise<unknown> } }) =>
          connection.promise().query("SET SESSION sql_mode = ''"),
      },
    })
    try {
      for (const [sequelize, message] of [
        [lossy, /supportBigNumbers/],
        [loose, /not strict/],
      ] as const) {
        shardedIds(sequelize, { source })
        const Thing = sequelize.define(
          'Thing',
          { id: shardedId({ shard: 1 }), name: DataTypes.STRING },
          common,
        )
        await Thing.sync()
        await expect(Thing.create({ name: 'refused' })).rejects.toThrow(message)
        expect(await raw.query('SELECT id FROM Things')).toHaveLength(0)
      }
    } finally {
      await lossy.close()
      await loose.close()
      await raw.close()
    }
  })
})
