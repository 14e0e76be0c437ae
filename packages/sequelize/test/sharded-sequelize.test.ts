/**
 * shardedSequelize() beyond the routed conformance suite: the guards every routed Sequelize runs
 * in its hooks, the router's handling of includes and supplied IDs, and the refusals of bad input
 * and of a bad setup. Two fresh databases on the shared PostgreSQL server play servers a and b.
 */
import {
  blogSchemaSql,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidArgumentError,
  MissingShardKeyError,
  ShardHomes,
  ShardMap,
  ShardOutOfRangeError,
  WrongServerError,
} from '@shardflake/core'
import { DataTypes, type Model, Sequelize } from 'sequelize'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type ShardedSequelize,
  shardedId,
  shardedIds,
  shardedSequelize,
  trustSuppliedIds,
} from '../src'
import { defineBlog, sequelizeOn } from './support/blog'

const sharding = testSharding()
const map = new ShardMap(sharding, [
  { from: 0, to: 31, target: 'a' },
  { from: 32, to: 63, target: 'b' },
])
const idOf = (instance: Model) => instance.get('id') as string
/** An application hook's doing: the new row with this key gets this ID after shardedIds() gave it one. */
let swap: { key: string; id: string } | undefined

describe('shardedSequelize (Sequelize 6, PostgreSQL)', () => {
  const raws: Record<string, RawDatabase> = {}
  const servers: Record<string, Sequelize> = {}
  const source = new InProcessSource({ sharding, shards: 'all' })
  let homes: ShardHomes<Sequelize>
  let sharded: ShardedSequelize

  beforeAll(async () => {
    for (const name of ['a', 'b']) {
      const raw = await freshDatabase('postgres', `sf_h23_sequelize_routed_${name}`)
      for (const sql of blogSchemaSql('postgres')) await raw.query(sql)
      raws[name] = raw
      const sequelize = sequelizeOn(raw)
      shardedIds(sequelize, { source })
      // Runs after shardedIds()'s hooks and before the router's home check (added later).
      const swapId = (instance: Model) => {
        if (swap && instance.get('shardKey') === swap.key) instance.setDataValue('id', swap.id)
      }
      sequelize.addHook('beforeCreate', 'test-swap-id', swapId)
      sequelize.addHook('beforeBulkCreate', 'test-swap-id', (instances: Model[]) => {
        for (const instance of instances) swapId(instance)
      })
      defineBlog(sequelize)
      sequelize.define('Note', { body: DataTypes.STRING }, { tableName: 'notes' })
      // The keyed table again, its key trimmed by a setter before the rule reads it.
      sequelize.define(
        'Trimmed',
        {
          id: shardedId({ shardBy: 'shardKey' }),
          shardKey: {
            type: DataTypes.STRING,
            set(value: string) {
              this.setDataValue('shardKey', value.trim())
            },
          },
        },
        { tableName: 'keyed', timestamps: false, underscored: true },
      )
      servers[name] = sequelize
    }
    homes = await ShardHomes.open({ sharding, servers, directory: map })
    sharded = shardedSequelize(homes)
  })

  afterAll(async () => {
    await homes?.close()
    for (const sequelize of Object.values(servers)) await sequelize.close()
    for (const raw of Object.values(raws)) await raw.close()
    source.close()
  })

  async function column(server: string, sql: string): Promise<string[]> {
    const rows = await raws[server]!.query(sql)
    return rows.map((row) => String(Object.values(row)[0]))
  }
  const keys = (server: string) => column(server, 'SELECT shard_key FROM keyed ORDER BY shard_key')
  const model = (server: string, name: string) => servers[server]!.model(name)
  let emails = 0
  /** A new email whose shard lives on `server`. */
  const emailOn = (server: string) => {
    for (;;) {
      const email = `writer-${++emails}@example.com`
      if (homes.serverOf(sharding.shardForKey(email)) === server) return email
    }
  }

  it('refuses a create through the Sequelize of another server, and writes nothing', async () => {
    // Key '40' is shard 40, whose home is b.
    await expect(model('a', 'Keyed').create({ shardKey: '40' })).rejects.toThrow(WrongServerError)
    await expect(
      model('a', 'Keyed').bulkCreate([{ shardKey: '1' }, { shardKey: '104' }]), // 104 is shard 40
    ).rejects.toMatchObject({ code: 'WRONG_SERVER' })
    expect(await keys('a')).toEqual([])
    const created = await sharded.create('Keyed', { shardKey: '40' })
    expect(sharding.shardOfId(idOf(created))).toBe(40)
    expect(await keys('b')).toEqual(['40'])
  })

  it('checks by its ID a row whose ID an application hook changed after shardedIds() gave it', async () => {
    // Key '7' is shard 7 (home a); the hook gives its row an ID of shard 40 (home b).
    const before = await keys('a')
    swap = { key: '7', id: source.nextId(40).toString() }
    try {
      await expect(
        sharded.bulkCreate('Keyed', [{ shardKey: '8' }, { shardKey: '7' }, { shardKey: '9' }]),
      ).rejects.toThrow(WrongServerError)
      await expect(sharded.create('Keyed', { shardKey: '7' })).rejects.toThrow(WrongServerError)
    } finally {
      swap = undefined
    }
    expect(await keys('a')).toEqual(before)
    const created = await sharded.bulkCreate('Keyed', [{ shardKey: '7' }, { shardKey: '8' }])
    expect(created.map((row) => sharding.shardOfId(idOf(row)))).toEqual([7, 8])
    await raws.a!.query(`DELETE FROM keyed WHERE shard_key IN ('7', '8')`)
  })

  it('refuses a nested create whose included parent lives on another server', async () => {
    const email = emailOn('b')
    await expect(
      model('a', 'Post').create(
        { title: 'stray', author: { email } },
        { include: [{ association: 'author' }] },
      ),
    ).rejects.toThrow(WrongServerError)
    expect(await column('a', 'SELECT email FROM authors')).not.toContain(email)
    const post = await sharded.create(
      'Post',
      { title: 'home', author: { email } },
      { include: [{ association: 'author' }] },
    )
    expect(sharding.shardOfId(idOf(post))).toBe(sharding.shardForKey(email))
    expect(await column('b', 'SELECT email FROM authors')).toContain(email)
  })

  it('refuses a create whose included child lives elsewhere before the parent is written', async () => {
    const author = await sharded.create('Author', { email: emailOn('a') })
    const stray = String(await source.nextId(40)) // an imported comment of shard 40 (home b)
    await expect(
      trustSuppliedIds(() =>
        model('a', 'Post').create(
          { authorId: idOf(author), title: 'import', comments: [{ id: stray, body: 'x' }] },
          { include: [{ association: 'comments' }] },
        ),
      ),
    ).rejects.toThrow(WrongServerError)
    // The same through bulkCreate, whose hook sees the include in its options.
    await expect(
      trustSuppliedIds(() =>
        model('a', 'Post').bulkCreate(
          [{ authorId: idOf(author), title: 'import', comments: [{ id: stray, body: 'x' }] }],
          { include: [{ association: 'comments' }] },
        ),
      ),
    ).rejects.toThrow(WrongServerError)
    expect(await column('a', 'SELECT title FROM posts')).not.toContain('import')
  })

  it('refuses an update or an upsert of a row of another server', async () => {
    const created = await sharded.create('Keyed', { shardKey: '41' })
    const id = idOf(created)
    // An old copy of the row left on a (as a move leaves it), loaded and changed there.
    await raws.a!.query('INSERT INTO keyed (id, shard_key) VALUES ($1, $2)', [id, '41'])
    const stranger = (await model('a', 'Keyed').findByPk(id))!
    await expect(stranger.update({ shardKey: '105' })).rejects.toThrow(WrongServerError) // 105: shard 41
    await expect(model('a', 'Keyed').upsert({ id, shardKey: '105' })).rejects.toThrow(
      WrongServerError,
    )
    expect(await column('a', 'SELECT shard_key FROM keyed')).toEqual(['41'])
    await raws.a!.query('DELETE FROM keyed WHERE id = $1', [id])
    await model('b', 'Keyed').upsert({ id, shardKey: '105' })
    expect(await keys('b')).toContain('105')
  })

  it('takes models of any server in includes, and places rows with an ID by the ID', async () => {
    const author = await sharded.create('Author', { email: 'include@example.com' })
    const home = homes.serverOf(sharding.shardOfId(idOf(author)))
    const other = home === 'a' ? 'b' : 'a'
    // The include names the other server's Comment class: the router takes the home's.
    const post = await sharded.create(
      model(other, 'Post'),
      { authorId: idOf(author), title: 'classes', comments: [{ body: 'c' }] },
      { include: [{ model: model(other, 'Comment'), as: 'comments' }] },
    )
    expect(post).toBeInstanceOf(model(home, 'Post'))
    expect(await column(home, 'SELECT body FROM comments')).toContain('c')
    // By association name, as the README writes it.
    const named = await sharded.create(
      'Post',
      { authorId: idOf(author), title: 'names', comments: [{ body: 'n' }] },
      { include: ['comments'] },
    )
    const loaded = await sharded
      .modelFor('Post', idOf(named))
      .findByPk(idOf(named), { include: ['comments'] })
    expect((loaded!.get('comments') as Model[]).map((c) => c.get('body'))).toEqual(['n'])
    const [onA, onB] = [await source.nextId(3), await source.nextId(50)]
    const placed = await sharded.bulkCreate('Keyed', [
      { id: String(onB), shardKey: null },
      { id: String(onA), shardKey: null },
    ])
    expect(placed.map(idOf)).toEqual([String(onB), String(onA)])
    expect(placed[0]).toBeInstanceOf(model('b', 'Keyed'))
    expect(await column('a', 'SELECT id::text FROM keyed')).toContain(String(onA))
    expect(await column('b', 'SELECT id::text FROM keyed')).toContain(String(onB))
  })

  it('writes a bulkCreate whose rows all live on one server there, in their order', async () => {
    // Keys '41', '40' and '63' are shards 41, 40 and 63: all on b.
    const created = await sharded.bulkCreate('Keyed', [
      { shardKey: '41' },
      { shardKey: '40' },
      { shardKey: '63' },
    ])
    expect(created.map((row) => row.get('shardKey'))).toEqual(['41', '40', '63'])
    for (const row of created) expect(row).toBeInstanceOf(model('b', 'Keyed'))
    const ids = created.map(idOf)
    const stored = (server: string) =>
      column(server, `SELECT id::text FROM keyed WHERE id IN (${ids.join(', ')})`)
    expect((await stored('b')).sort()).toEqual([...ids].sort())
    expect(await stored('a')).toEqual([])
    await raws.b!.query(`DELETE FROM keyed WHERE id IN (${ids.join(', ')})`)
  })

  it('writes a one-record bulkCreate on its home, whichever server that is', async () => {
    // Keys '3', '41' and '63' are shards 3, 41 and 63: on a, b and b.
    for (const [key, server] of [
      ['3', 'a'],
      ['41', 'b'],
      ['63', 'b'],
    ] as const) {
      const [created] = await sharded.bulkCreate('Keyed', [{ shardKey: key }])
      expect(created).toBeInstanceOf(model(server, 'Keyed'))
      const id = idOf(created!)
      const stored = (on: string) => column(on, `SELECT id::text FROM keyed WHERE id = ${id}`)
      expect(await stored(server)).toEqual([id])
      expect(await stored(server === 'a' ? 'b' : 'a')).toEqual([])
      await raws[server]!.query(`DELETE FROM keyed WHERE id = ${id}`)
    }
  })

  it('places a row by its key as the model stores it, whatever the key', async () => {
    const trimmed = await sharded.create('Trimmed', { shardKey: ' 44 ' })
    expect(sharding.shardOfId(idOf(trimmed))).toBe(44)
    expect(await keys('b')).toContain('44')
    // Each row is refused by the guard unless the router sent it to its shard's home.
    const mixed = ['ada', '17', '-5', '63', 'Ärger', '18446744073709551617', 'x'.repeat(300)]
    const created = await sharded.bulkCreate(
      'Keyed',
      mixed.map((shardKey) => ({ shardKey })),
    )
    expect(created.map((row) => sharding.shardOfId(idOf(row)))).toEqual(
      mixed.map((key) => sharding.shardForKey(key)),
    )
  })

  it('reads by ID, key and shard from the server holding it', async () => {
    const created = await sharded.create('Keyed', { shardKey: '7' })
    const found = await sharded.modelFor('Keyed', idOf(created)).findByPk(idOf(created))
    expect(found?.get('shardKey')).toBe('7')
    expect(await sharded.forKey('7').models.Keyed!.count({ where: { shardKey: '7' } })).toBe(1)
    expect(await sharded.forShard(40).models.Keyed!.count({ where: { shardKey: '7' } })).toBe(0)
    const none = await sharded.fanOut((sequelize) =>
      sequelize.models.Keyed!.findAll({ where: sharded.inShards([]) }),
    )
    expect(none).toEqual([])
  })

  it('refuses bad input with typed errors, before anything is written', async () => {
    const cases: [unknown, new (...args: never[]) => Error][] = [
      [undefined, InvalidArgumentError],
      [{}, InvalidArgumentError],
      [{ shard: 64 }, ShardOutOfRangeError],
      [{ key: null }, MissingShardKeyError],
    ]
    for (const [where, type] of cases) {
      await expect(sharded.transaction(where as never, async () => undefined)).rejects.toThrow(type)
    }
    await expect(sharded.transaction({ shard: 1 }, 'x' as never)).rejects.toThrow(
      InvalidArgumentError,
    )
    await expect(sharded.bulkCreate('Keyed', 'x' as never)).rejects.toThrow(InvalidArgumentError)
    await expect(sharded.bulkCreate('Keyed', [null as never])).rejects.toThrow(InvalidArgumentError)
    await expect(sharded.create('Keyed', {})).rejects.toThrow(MissingShardKeyError)
    await expect(sharded.bulkCreate('Post', [{ title: 'orphan' }])).rejects.toThrow(
      MissingShardKeyError,
    )
    const transaction = await servers.a!.transaction()
    await expect(
      sharded.create('Keyed', { shardKey: '1' }, { transaction } as never),
    ).rejects.toThrow(InvalidArgumentError)
    await transaction.rollback()
    await expect(sharded.create('Nothing', { shardKey: '1' })).rejects.toThrow(ConfigurationError)
    await expect(sharded.create('Note', { body: 'x' })).rejects.toThrow(ConfigurationError)
    await expect(sharded.create(42 as never, {})).rejects.toThrow(InvalidArgumentError)
    const onShard1 = await source.nextId(1)
    expect(() => sharded.modelFor('Nothing', onShard1)).toThrow(ConfigurationError)
    expect(() => sharded.inShards([1], 'id; DROP TABLE keyed')).toThrow(InvalidArgumentError)
    expect(() => sharded.inShards([64])).toThrow(ShardOutOfRangeError)
    expect(await keys('a')).not.toContain('1')
    expect(await column('a', 'SELECT title FROM posts')).not.toContain('orphan')
  })

  it('refuses ShardHomes whose Sequelize instances have no shardedIds, or share one', async () => {
    const plain = new Sequelize('postgres://localhost/none', { logging: false })
    const bare = await ShardHomes.open({
      sharding,
      servers: { a: plain, b: servers.b! },
      directory: map,
    })
    expect(() => shardedSequelize(bare)).toThrow(ConfigurationError)
    await bare.close()
    await plain.close()
    const shared = await ShardHomes.open({
      sharding,
      servers: { a: servers.a!, b: servers.a! },
      directory: map,
    })
    expect(() => shardedSequelize(shared)).toThrow(/same Sequelize/)
    await shared.close()
    expect(() => shardedSequelize({} as never)).toThrow(InvalidArgumentError)
    expect(shardedSequelize(homes)).toBe(sharded)
  })
})
