/**
 * What shardedIds() refuses, and when: driver settings at once, entities when the DataSource
 * initializes (before synchronize, before any insert), a second call for one DataSource, a
 * non-strict MariaDB session. Registers the tests; `tag` keeps each TypeORM major's databases apart.
 */
import {
  type Dialect,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidArgumentError,
  InvalidShardRuleError,
  ShardConflictError,
  type ShardflakeError,
  ShardOutOfRangeError,
} from '@shardflake/core'
import mysql from 'mysql2'
import pg from 'pg'
import {
  Column,
  DataSource,
  type DataSourceOptions,
  Entity,
  JoinColumn,
  ManyToOne,
  PrimaryColumn,
  PrimaryGeneratedColumn,
} from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  registerShardedId,
  ShardedId,
  type ShardedIdOptions,
  type ShardMigrationOptions,
  shardedIdColumn,
  shardedIds,
  shardMigration,
} from '../src'
import { Author, dataSourceOptions, Keyed } from './blog'

@Entity('by_relation')
class ShardByRelation {
  @ShardedId<ShardByRelation>({ shardBy: 'author' })
  id?: string

  @ManyToOne(() => Author)
  @JoinColumn({ name: 'author_id' })
  author?: Author
}

@Entity('by_fk')
class ShardByForeignKey {
  @ShardedId<ShardByForeignKey>({ shardBy: 'authorId' })
  id?: string

  @Column({ type: 'bigint', name: 'author_id' })
  authorId?: string

  @ManyToOne(() => Author)
  @JoinColumn({ name: 'author_id' })
  author?: Author
}

@Entity('unsharded')
class Unsharded {
  @PrimaryColumn({ type: 'bigint' })
  id!: string
}

@Entity('same_as_unsharded')
class SameShardAsUnsharded {
  @ShardedId<SameShardAsUnsharded>({ sameShardAs: 'parent' })
  id?: string

  @ManyToOne(() => Unsharded)
  parent?: Unsharded
}

@Entity('names_nothing')
class NamesNothing {
  @ShardedId<NamesNothing>({ shardBy: 'tenant' as never })
  id?: string
}

@Entity('no_shard_column')
class NoShardColumn {
  @ShardedId<NoShardColumn>({ shard: 1, shardColumn: 'lshard' as never })
  id?: string
}

@Entity('text_shard_column')
class TextShardColumn {
  @ShardedId<TextShardColumn>({ shard: 1, shardColumn: 'lshard' })
  id?: string
  @Column({ type: 'varchar' }) lshard?: string
}

@Entity('fixed_shard')
class FixedShardTooFar {
  @ShardedId({ shard: 9999 })
  id?: string
}

@Entity('int_key')
class IntKey {
  @PrimaryColumn({ type: 'int' })
  id?: number
}
registerShardedId(IntKey, 'id', { shard: 1 })

@Entity('varchar_key')
class VarcharKey {
  @PrimaryColumn({ type: 'varchar', length: 40 })
  id?: string
}
registerShardedId(VarcharKey, 'id', { shard: 1 })

@Entity('generated_key')
class GeneratedKey {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id?: string
}
registerShardedId(GeneratedKey, 'id', { shard: 1 })

/** The error `promise` rejects with. */
async function failure(promise: Promise<unknown>): Promise<ShardflakeError> {
  return promise.then(
    () => {
      throw new Error('expected a rejection')
    },
    (error: unknown) => error as ShardflakeError,
  )
}

export function describeStartup(tag: string): void {
  const sharding = testSharding()
  let source: InProcessSource

  beforeAll(() => {
    source = new InProcessSource({ sharding, shards: 'all' })
  })
  afterAll(() => source?.close())

  describe('driver settings, refused by shardedIds() itself', () => {
    it('refuses parseInt8 on PostgreSQL', () => {
      const dataSource = new DataSource({ type: 'postgres', parseInt8: true })
      expect(() => shardedIds(dataSource, { source })).toThrow(ConfigurationError)
      expect(() => shardedIds(dataSource, { source })).toThrow(/parseInt8/)
    })

    it('refuses a pg type parser that turns BIGINT into a number', () => {
      const before = pg.types.getTypeParser(20)
      pg.types.setTypeParser(20, Number)
      try {
        expect(() => shardedIds(new DataSource({ type: 'postgres' }), { source })).toThrow(
          ConfigurationError,
        )
      } finally {
        pg.types.setTypeParser(20, before)
      }
      expect(() => shardedIds(new DataSource({ type: 'postgres' }), { source })).not.toThrow()
    })

    it('refuses mysql2 without bigNumberStrings, in the options or in extra', () => {
      for (const options of [
        { bigNumberStrings: false },
        { supportBigNumbers: false },
        { extra: { bigNumberStrings: false } },
      ]) {
        const dataSource = new DataSource({ type: 'mariadb', ...options })
        expect(() => shardedIds(dataSource, { source })).toThrow(ConfigurationError)
      }
    })

    it('refuses a number idType', () => {
      const dataSource = new DataSource({ type: 'postgres' })
      expect(() => shardedIds(dataSource, { source, idType: 'number' as 'string' })).toThrow(
        ConfigurationError,
      )
    })

    it('refuses a second shardedIds() for one DataSource with ShardConflictError', () => {
      const dataSource = new DataSource({ type: 'postgres' })
      shardedIds(dataSource, { source })
      expect(() => shardedIds(dataSource, { source })).toThrow(ShardConflictError)
    })

    it('refuses a misspelt option of shardedIds(), @ShardedId, shardedIdColumn and shardMigration, naming the closest', () => {
      const dataSource = new DataSource({ type: 'postgres' })
      const misspelt = { source, idtype: 'bigint' } as Parameters<typeof shardedIds>[1]
      expect(() => shardedIds(dataSource, misspelt)).toThrow(InvalidArgumentError)
      expect(() => shardedIds(dataSource, misspelt)).toThrow(/Did you mean "idType"/)
      const rule = { shardBy: 'email', stringkeys: 'hash' } as ShardedIdOptions
      expect(() => ShardedId(rule)(Keyed.prototype, 'id')).toThrow(/Did you mean "stringKeys"/)
      expect(() => shardedIdColumn({ shard: 1, coment: 'x' } as ShardedIdOptions)).toThrow(
        /Did you mean "comment"/,
      )
      expect(() =>
        registerShardedId(Keyed, 'id', { shardBy: 'shardKey', stringKeys: 'hashed' as 'hash' }),
      ).toThrow(InvalidShardRuleError)
      expect(() =>
        shardMigration('Shards1732250000000', { up: 'SELECT 1', down: 'SELECT 1' }, {
          transation: false,
        } as ShardMigrationOptions),
      ).toThrow(/Did you mean "transaction"/)
      // Nothing was installed by the refused call.
      expect(() => shardedIds(dataSource, { source })).not.toThrow()
    })

    it('refuses a rule with no or two shard sources with InvalidShardRuleError', () => {
      expect(() => registerShardedId(Keyed, 'id', {} as { shard: number })).toThrow(
        InvalidShardRuleError,
      )
      expect(() =>
        registerShardedId(Keyed, 'id', { shard: 1, shardBy: 'x' } as { shard: number }),
      ).toThrow(InvalidShardRuleError)
    })
  })

  for (const dialect of ['postgres', 'mysql'] as const satisfies readonly Dialect[]) {
    describe(`entities, refused when the DataSource initializes, on ${dialect}`, () => {
      let raw: RawDatabase

      beforeAll(async () => {
        raw = await freshDatabase(dialect, `sf_typeorm_${tag}startup_${dialect.slice(0, 2)}`)
      })
      afterAll(() => raw?.close())

      /** initialize() of a DataSource with `entities` (and `synchronize`), rejected. */
      // biome-ignore lint/complexity/noBannedTypes: TypeORM entities are classes.
      const refused = async (entities: Function[]) => {
        const dataSource = new DataSource({
          ...dataSourceOptions(raw, [Author, Unsharded, ...entities]),
          synchronize: true,
        } as DataSourceOptions)
        shardedIds(dataSource, { source })
        const error = await failure(dataSource.initialize())
        expect(dataSource.isInitialized).toBe(false) // TypeORM closed the connection
        return error
      }

      const tables = async () =>
        (
          await raw.query(
            dialect === 'postgres'
              ? "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'"
              : 'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = DATABASE()',
          )
        ).map((row) => String(row.name ?? row.NAME ?? row.TABLE_NAME))

      it('refuses shardBy on a relation to a sharded entity, naming sameShardAs, before synchronize', async () => {
        const error = await refused([ShardByRelation])
        expect(error).toBeInstanceOf(InvalidShardRuleError)
        expect(error.message).toMatch(/sameShardAs: 'author'/)
        expect(await tables()).toEqual([]) // refused before synchronize created anything
      })

      it('refuses shardBy on the foreign-key column of a sharded parent, naming sameShardAs', async () => {
        const error = await refused([ShardByForeignKey])
        expect(error).toBeInstanceOf(InvalidShardRuleError)
        expect(error.message).toMatch(/shardBy 'authorId'.*sameShardAs: 'author'/)
      })

      it('refuses a shardColumn the entity does not have, or that is not an integer column', async () => {
        const missing = await refused([NoShardColumn])
        expect(missing).toBeInstanceOf(InvalidShardRuleError)
        expect(missing.message).toMatch(/'lshard', which NoShardColumn does not have/)
        const text = await refused([TextShardColumn])
        expect(text).toBeInstanceOf(ConfigurationError)
        expect(text.message).toMatch(/must be an integer column/)
      })

      it('refuses sameShardAs on a parent whose key is not sharded, and a rule naming nothing', async () => {
        expect(await refused([SameShardAsUnsharded])).toBeInstanceOf(InvalidShardRuleError)
        const nothing = await refused([NamesNothing])
        expect(nothing).toBeInstanceOf(InvalidShardRuleError)
        expect(nothing.message).toMatch(/names no column or relation/)
      })

      it('installs once per DataSource, after the metadata is built, and refuses a late call', async () => {
        const dataSource = new DataSource(dataSourceOptions(raw, [Author]))
        const subscriber = shardedIds(dataSource, { source })
        await dataSource.initialize()
        try {
          expect(dataSource.subscribers.filter((s) => s === subscriber)).toHaveLength(1)
          expect(() => shardedIds(dataSource, { source })).toThrow(ShardConflictError)
          const late = new DataSource(dataSourceOptions(raw, [Author]))
          await late.initialize()
          expect(() => shardedIds(late, { source })).toThrow(ConfigurationError)
          await late.destroy()
        } finally {
          await dataSource.destroy()
        }
      })

      it('refuses a fixed shard outside the logical shards', async () => {
        expect(await refused([FixedShardTooFar])).toBeInstanceOf(ShardOutOfRangeError)
      })

      it('refuses key columns that cannot hold 64 bits: int, varchar', async () => {
        for (const entity of [IntKey, VarcharKey]) {
          const error = await refused([entity])
          expect(error).toBeInstanceOf(ConfigurationError)
          expect(error.message).toMatch(/cannot hold a 64-bit ID/)
        }
      })

      it('refuses a key the database generates (@PrimaryGeneratedColumn)', async () => {
        const error = await refused([GeneratedKey])
        expect(error).toBeInstanceOf(ConfigurationError)
        expect(error.message).toMatch(/generated by the database/)
        expect(await tables()).toEqual([])
      })
    })
  }

  describe('sql_mode on MariaDB', () => {
    let raw: RawDatabase

    beforeAll(async () => {
      raw = await freshDatabase('mysql', `sf_typeorm_${tag}sqlmode`)
    })
    afterAll(() => raw?.close())

    /** mysql2 whose pools put every new connection in `mode`. */
    const driverWithMode = (mode: string) => ({
      ...mysql,
      createPool(options: mysql.PoolOptions) {
        const pool = mysql.createPool(options)
        pool.on('connection', (connection) => {
          connection.query(`SET SESSION sql_mode = '${mode}'`)
        })
        return pool
      },
    })

    it('refuses a session that is not strict (a missing key would be stored as 0)', async () => {
      const dataSource = new DataSource({
        type: 'mariadb',
        url: raw.url,
        entities: [Author],
        driver: driverWithMode('NO_ENGINE_SUBSTITUTION'),
      })
      shardedIds(dataSource, { source })
      const error = await failure(dataSource.initialize())
      expect(error).toBeInstanceOf(ConfigurationError)
      expect(error.message).toMatch(/STRICT_TRANS_TABLES/)
    })

    it('accepts a strict session', async () => {
      const dataSource = new DataSource({
        type: 'mariadb',
        url: raw.url,
        entities: [Author],
        driver: driverWithMode('STRICT_TRANS_TABLES'),
      })
      shardedIds(dataSource, { source })
      await dataSource.initialize()
      await dataSource.destroy()
    })
  })
}
