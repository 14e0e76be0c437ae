/** `shardColumn` refused when shardedIds() sees the model: not an attribute, not an integer, not nullable, or plain IDs. */
import { testSharding } from '@shardflake/conformance'
import {
  ConfigurationError,
  type IdSource,
  InProcessSource,
  InvalidShardRuleError,
} from '@shardflake/core'
import { DataTypes, type ModelAttributes, Sequelize } from 'sequelize'
import { afterAll, describe, expect, it } from 'vitest'
import { shardedId, shardedIds } from '../src'

const source = new InProcessSource({ sharding: testSharding(64), shards: 'all' })
afterAll(() => source.close())

/** A Sequelize instance that never connects, with Order defined, then shardedIds(). */
function install(lshard: ModelAttributes[string] | undefined, from: IdSource = source) {
  const sequelize = new Sequelize('postgres://nobody@127.0.0.1:1/none', { logging: false })
  sequelize.define(
    'Order',
    {
      id: shardedId({ shardBy: 'tenant', shardColumn: 'lshard' }),
      tenant: DataTypes.STRING,
      ...(lshard === undefined ? {} : { lshard }),
    },
    { timestamps: false },
  )
  return () => shardedIds(sequelize, { source: from })
}

describe('shardColumn', () => {
  it('takes an integer attribute of the model', () => {
    expect(install(DataTypes.INTEGER)).not.toThrow()
  })

  it('refuses an attribute the model does not have, with InvalidShardRuleError', () => {
    expect(install(undefined)).toThrow(InvalidShardRuleError)
    expect(install(undefined)).toThrow(/'lshard', which Order does not have/)
  })

  it('refuses a column that is not an integer, or has allowNull: false, with ConfigurationError', () => {
    expect(install(DataTypes.STRING)).toThrow(ConfigurationError)
    expect(install({ type: DataTypes.INTEGER, allowNull: false })).toThrow(/allowNull: false/)
  })

  it('refuses a source of plain IDs, which carry no shard', () => {
    const plain = Object.assign(Object.create(source) as IdSource, { sharding: undefined })
    expect(install(DataTypes.INTEGER, plain)).toThrow(/plain IDs/)
  })
})
