/**
 * What `shardedIds()` checks when MikroORM starts: rules with one meaning in every adapter, key
 * columns it can serve, one shardedIds() per ORM.
 */
import { defineEntity, type EntityName, type MikroORM, p } from '@mikro-orm/core'
import { Entity, Property } from '@mikro-orm/decorators/legacy'
import { asAsync, postgresUrl, testSharding } from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidShardRuleError,
  ShardConflictError,
  ShardOutOfRangeError,
} from '@shardflake/core'
import { afterAll, describe, expect, it } from 'vitest'
import { shardedId, shardedIds } from '../src'
import { ShardedId } from '../src/legacy'
import { openOrm } from './support/blog'

const sharding = testSharding(16)
const source = new InProcessSource({ sharding, shards: 'all' })
afterAll(() => source.close())

const User = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: { id: shardedId({ shardBy: 'email' }), email: p.string() },
})
/** An autoincrement entity: its key is a plain shard key. */
const Tenant = defineEntity({
  name: 'Tenant',
  tableName: 'tenants',
  properties: { id: p.bigint().primary(), name: p.string() },
})

/** A post whose author is both a relation and a scalar foreign-key property (`authorId`). */
function postWith(rule: Parameters<typeof shardedId>[0]) {
  return defineEntity({
    name: 'Post',
    tableName: 'posts',
    properties: {
      id: shardedId(rule as { shardBy: string }),
      author: () => p.manyToOne(User),
      authorId: p.bigint().fieldName('author_id').persist(false),
      tenant: () => p.manyToOne(Tenant).nullable(),
      title: p.string(),
    },
  })
}

async function start(entities: EntityName[], extensions = [shardedIds({ source })]) {
  let orm: MikroORM | undefined
  try {
    orm = await openOrm('postgres', postgresUrl(), [User, Tenant, ...entities], extensions)
    return orm
  } finally {
    await orm?.close(true)
  }
}

describe('shard rules, checked when MikroORM starts', () => {
  it.each([
    ['the relation', 'author'],
    ['its foreign-key property', 'authorId'],
  ])('refuses shardBy on %s of a sharded entity, naming sameShardAs', async (_, field) => {
    const failure = start([postWith({ shardBy: field })])
    await expect(failure).rejects.toBeInstanceOf(InvalidShardRuleError)
    await expect(failure).rejects.toThrow(`{ sameShardAs: '${field}' }`)
  })

  it.each(['author', 'authorId'])(
    'accepts sameShardAs %s (relation or foreign key)',
    async (field) => {
      await expect(start([postWith({ sameShardAs: field })])).resolves.toBeDefined()
    },
  )

  it('accepts shardBy on a relation to an autoincrement entity (its key is a plain key)', async () => {
    await expect(start([postWith({ shardBy: 'tenant' })])).resolves.toBeDefined()
  })

  it('refuses sameShardAs on a relation to an entity whose key is not sharded', async () => {
    const failure = start([postWith({ sameShardAs: 'tenant' })])
    await expect(failure).rejects.toBeInstanceOf(InvalidShardRuleError)
    await expect(failure).rejects.toThrow("{ shardBy: 'tenant' }")
  })

  it('refuses a rule naming no property of the entity', async () => {
    await expect(start([postWith({ shardBy: 'writer' })])).rejects.toThrow(
      /shardBy 'writer' names no property of Post/,
    )
  })

  it('refuses a shardColumn the entity does not have, or that is not an integer property', async () => {
    const order = (shardColumn: string, lshard: ReturnType<typeof p.integer | typeof p.string>) =>
      defineEntity({
        name: 'Order',
        tableName: 'orders',
        properties: {
          id: shardedId({ shardBy: 'tenant', shardColumn }),
          tenant: p.string(),
          lshard: lshard.nullable(),
        },
      })
    await expect(start([order('lshard', p.integer())])).resolves.toBeDefined()
    const missing = start([order('lshrad', p.integer())])
    await expect(missing).rejects.toBeInstanceOf(InvalidShardRuleError)
    await expect(missing).rejects.toThrow(/'lshrad', which Order does not have/)
    await expect(start([order('lshard', p.string())])).rejects.toBeInstanceOf(ConfigurationError)
  })

  it('accepts shardBy on a getter of the entity class', async () => {
    @Entity({ tableName: 'orders' })
    class Order {
      @ShardedId<Order>({ shardBy: 'region' }) id!: bigint
      @Property({ type: 'string' }) address!: string
      get region(): string {
        return this.address.split(',').at(-1)!.trim()
      }
    }
    const orm = await openOrm('postgres', postgresUrl(), [Order], [shardedIds({ source })])
    try {
      const order = orm.em.fork().create(Order, { address: '1 Main St, Lyon' } as Order)
      expect(sharding.shardOfId(order.id)).toBe(sharding.shardForKey('Lyon'))
    } finally {
      await orm.close(true)
    }
  })

  it('refuses a fixed shard outside the logical shards', async () => {
    const Fixed = defineEntity({
      name: 'Fixed',
      properties: { id: shardedId({ shard: 16 }), body: p.string() },
    })
    const failure = start([Fixed])
    await expect(failure).rejects.toBeInstanceOf(ShardOutOfRangeError)
    await expect(failure).rejects.toThrow(
      /Fixed \(\{ shard: 16 \}\) is on shard 16, outside the 16 logical shards/,
    )
  })

  it('refuses a malformed rule where the key is declared', () => {
    expect(() => shardedId({ shardBy: 'email', shard: 3 } as never)).toThrow(InvalidShardRuleError)
    expect(() => shardedId({} as never)).toThrow(InvalidShardRuleError)
  })
})

describe('key columns, checked when MikroORM starts', () => {
  it('refuses a key column that cannot hold 64 bits', async () => {
    const Narrow = defineEntity({
      name: 'Narrow',
      properties: { id: shardedId({ shard: 0 }).columnType('int'), body: p.string() },
    })
    const failure = start([Narrow])
    await expect(failure).rejects.toBeInstanceOf(ConfigurationError)
    await expect(failure).rejects.toThrow(/Narrow.id is a "int" column; it needs 64 bits/)
  })

  it('refuses a key the database generates', async () => {
    const Generated = defineEntity({
      name: 'Generated',
      properties: { id: shardedId({ shard: 0 }).generated('1'), body: p.string() },
    })
    await expect(start([Generated])).rejects.toThrow(/Generated.id is generated by the database/)
  })
})

describe('one shardedIds() per MikroORM', () => {
  it('refuses a second shardedIds() with ShardConflictError', async () => {
    const second = shardedIds({ source: asAsync(source) })
    await expect(start([], [shardedIds({ source }), second])).rejects.toBeInstanceOf(
      ShardConflictError,
    )
  })

  it('refuses shardedIds() listed as a plain subscriber, which would skip the checks', async () => {
    const failure = openOrm('postgres', postgresUrl(), [User], [], {
      subscribers: [shardedIds({ source })],
    })
    await expect(failure).rejects.toThrow(/list it in `extensions/)
  })

  it("gives keys without their own idType the extension's idType", async () => {
    const Note = defineEntity({
      name: 'Note',
      properties: { id: shardedId({ shard: 3 }), body: p.string() },
    })
    const orm = await openOrm(
      'postgres',
      postgresUrl(),
      [Note],
      [shardedIds({ source, idType: 'string' })],
    )
    try {
      const note = orm.em.fork().create(Note, { body: 'string key' })
      expect(typeof note.id).toBe('string')
      expect(sharding.shardOfId(note.id)).toBe(3)
    } finally {
      await orm.close(true)
    }
  })
})
