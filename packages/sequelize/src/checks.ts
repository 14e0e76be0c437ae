/**
 * What `shardedIds()` checks about the models it serves, before any row is written: the key
 * column can carry an ID, and every rule means what it says.
 */
import {
  ConfigurationError,
  checkShardColumn,
  describeShardRule,
  InvalidShardRuleError,
  type Sharding,
  shardByOnShardedIdError,
} from '@shardflake/core'
import type { Association, Model, ModelAttributeColumnOptions, ModelStatic } from 'sequelize'
import { type ShardedKey, shardedKeyOf } from './sharded-id'

type AnyModel = ModelStatic<Model>

/**
 * Checks what a model's own definition shows: the key is the single `BIGINT` primary key, not
 * generated, without a `defaultValue` or `allowNull: false`, and a fixed shard is one of the
 * logical shards. Runs when a model is defined (and for models defined before `shardedIds()`).
 * @throws ConfigurationError
 * @throws ShardOutOfRangeError
 */
export function checkDefinition(model: AnyModel, key: ShardedKey, sharding?: Sharding): void {
  const where = `${model.name}.${key.attribute}`
  const { options } = key
  if (options.primaryKey !== true || model.primaryKeyAttributes.length !== 1) {
    throw new ConfigurationError(
      `${where} is a sharded ID but not the model's only primary key (${model.primaryKeyAttributes.join(', ') || 'none'}). shardedId() makes the single-column primary key: do not set primaryKey: false, and give no other attribute primaryKey: true.`,
    )
  }
  if (options.autoIncrement === true || options.autoIncrementIdentity === true) {
    throw new ConfigurationError(
      `${where} is autoIncrement: the database would number the row and drop the sharded ID. Remove autoIncrement from it.`,
    )
  }
  if (options.defaultValue !== undefined) {
    throw new ConfigurationError(
      `${where} has a defaultValue. Sequelize calls defaultValue synchronously, without the row, when an instance is built, so it can neither follow a shard rule nor wait for a database source. Remove it: shardedIds() assigns the key in beforeCreate/beforeBulkCreate.`,
    )
  }
  if (options.allowNull === false) {
    throw new ConfigurationError(
      `${where} has allowNull: false. Sequelize validates a new instance before its beforeCreate hook, where the key is assigned, so every create would fail validation. Remove it: a primary key is NOT NULL in the database anyway.`,
    )
  }
  const type = options.type as { key?: unknown } | string | undefined
  const typeKey = typeof type === 'string' ? type : type?.key
  if (String(typeKey).toUpperCase() !== 'BIGINT') {
    throw new ConfigurationError(
      `${where} is a ${String(typeKey)} attribute, which cannot hold a 64-bit ID. Make it DataTypes.BIGINT (shardedId() does).`,
    )
  }
  const { rule } = key.spec
  if ('shard' in rule && sharding) {
    sharding.checkShard(rule.shard, `${model.name} ({ shard: ${rule.shard} })`)
  }
  checkShardColumnOf(model, key, sharding)
}

/** Integer types a shard column may have. */
const INTEGERS = new Set(['INTEGER', 'SMALLINT', 'TINYINT', 'MEDIUMINT', 'BIGINT'])

/**
 * The rule's `shardColumn`: an attribute of the model, an integer, that may be null until the
 * hooks fill it; and a source whose IDs carry a shard.
 * @throws InvalidShardRuleError, ConfigurationError
 */
function checkShardColumnOf(model: AnyModel, key: ShardedKey, sharding: Sharding | undefined) {
  const attributes = model.getAttributes()
  const name = checkShardColumn(key.spec.rule, model.name, {
    fields: Object.keys(attributes),
    idField: key.attribute,
  })
  if (name === undefined) return
  const where = `${model.name}.${name}`
  if (!sharding) {
    throw new ConfigurationError(
      `${where} is the shard column of ${model.name}, but the source makes plain IDs (ticket servers) that carry no shard. Use a source with a layout, or drop shardColumn.`,
    )
  }
  const options = attributes[name]!
  const type = options.type as { key?: unknown } | string | undefined
  const typeKey = String(typeof type === 'string' ? type : type?.key).toUpperCase()
  if (!INTEGERS.has(typeKey)) {
    throw new ConfigurationError(
      `${where} is the shard column of ${model.name}, a ${typeKey} attribute: make it DataTypes.INTEGER (it holds the logical shard of the row's ID).`,
    )
  }
  if (options.allowNull === false) {
    throw new ConfigurationError(
      `${where} (the shard column) has allowNull: false. Sequelize validates a new instance before its beforeCreate hook, where the column is filled, so every create would fail validation. Remove it, and declare the column NOT NULL in the table.`,
    )
  }
}

/**
 * Checks a rule against the model's attributes and associations as they are now.
 * - `shardBy` naming an association, or an attribute that references a model with a sharded ID,
 *   is refused (`sameShardAs` is what co-locates children with their parent).
 * - `sameShardAs` must name a `belongsTo` association or a foreign-key attribute of a model with a
 *   sharded ID whose primary key it references, or an attribute holding a parent's ID.
 * With `complete`, a rule naming nothing the model has is refused too; before the application has
 * declared its associations (`complete: false`), such a name may still come.
 * @throws InvalidShardRuleError
 */
export function checkRule(model: AnyModel, key: ShardedKey, complete: boolean): void {
  const { rule } = key.spec
  if ('shard' in rule) return
  const field = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
  if (typeof field !== 'string') return
  const name = model.name
  const association = model.associations[field]
  const attribute = model.getAttributes()[field]
  const referenced = attribute ? referencedModel(model, attribute) : undefined
  if ('shardBy' in rule) {
    if (association) {
      throw new InvalidShardRuleError(
        `${name}: shardBy '${field}' names an association, whose value is an instance, not a key. Name the attribute holding the key${association.associationType === 'BelongsTo' ? ` ('${association.foreignKey}')` : ''}, or give a function.`,
      )
    }
    if (referenced && shardedKeyOf(referenced)) {
      const via = belongsToWithKey(model, field)
      throw shardByOnShardedIdError(name, field, referenced.name, via?.as ?? field)
    }
  } else {
    const via = association ?? belongsToWithKey(model, field)
    if (association && association.associationType !== 'BelongsTo') {
      throw new InvalidShardRuleError(
        `${name}: sameShardAs '${field}' names a ${association.associationType} association; a row has one parent: name a belongsTo association or its foreign key.`,
      )
    }
    const parent = via?.target ?? referenced
    if (parent && !shardedKeyOf(parent)) {
      throw new InvalidShardRuleError(
        `${name}: sameShardAs '${field}' points at ${parent.name}, whose key is not a sharded ID, so it has no shard to share. Use { shardBy: '${via?.foreignKey ?? field}' } to use its key as a plain shard key.`,
      )
    }
    if (via) {
      const targetKey = Reflect.get(via, 'targetKey')
      if (typeof targetKey === 'string' && targetKey !== via.target.primaryKeyAttribute) {
        throw new InvalidShardRuleError(
          `${name}: sameShardAs '${field}' references ${via.target.name}.${targetKey}, not its sharded ID, so the parent's shard cannot be read from it. Reference the primary key (no targetKey), or give a function returning the parent's ID.`,
        )
      }
    }
  }
  if (complete && !association && !attribute && !hasAccessor(model, field)) {
    throw new InvalidShardRuleError(
      `${name}: ${describeShardRule(rule as never)} names no attribute or association of ${name}. Declare it (or the association) before the first write, or give a function.`,
    )
  }
}

/** The `belongsTo` association of `model` whose foreign key is the attribute `attribute`. */
export function belongsToWithKey(model: AnyModel, attribute: string): Association | undefined {
  return Object.values(model.associations).find(
    (association) =>
      association.associationType === 'BelongsTo' && association.foreignKey === attribute,
  )
}

/** The model an attribute's `references` points at (set by associations or by hand). */
function referencedModel(
  model: AnyModel,
  attribute: ModelAttributeColumnOptions,
): AnyModel | undefined {
  const references = attribute.references
  if (!references) return undefined
  const target: unknown = typeof references === 'string' ? references : references.model
  if (isModelClass(target)) return target
  const table = tableName(target)
  if (!table) return undefined
  return Object.values(model.sequelize?.models ?? {}).find(
    (candidate) => tableName(candidate.getTableName()) === table,
  )
}

/** A table name, with its schema when there is one, from what `getTableName()` returns. */
function tableName(value: unknown): string | undefined {
  if (typeof value === 'string') return value
  if (typeof value === 'object' && value !== null) {
    const table: unknown = Reflect.get(value, 'tableName')
    const schema: unknown = Reflect.get(value, 'schema')
    if (typeof table === 'string') return typeof schema === 'string' ? `${schema}.${table}` : table
  }
  return undefined
}

function isModelClass(value: unknown): value is AnyModel {
  return typeof value === 'function' && typeof Reflect.get(value, 'getTableName') === 'function'
}

/** A getter or method of the model's class (a key computed in code). */
function hasAccessor(model: AnyModel, field: string): boolean {
  return field in model.prototype
}
