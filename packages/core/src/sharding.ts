import {
  ConfigurationError,
  InvalidArgumentError,
  InvalidShardRuleError,
  MissingShardKeyError,
  ShardingMismatchError,
  ShardOutOfRangeError,
} from './errors'
import { type IdInput, toBigInt } from './id-value'
import { checkKnownOptions, describeValue } from './known-options'
import type { Layout } from './layout'
import { describeInstant, type LayoutDescription } from './layout-options'
import { checkShardColumn } from './shard-column'
import { type ShardKey, type StringKeyMode, shardForKey } from './shard-key'

/** What {@link defineSharding} takes. */
export interface ShardingOptions {
  /** The layout of every ID the application makes. */
  readonly layout: Layout
  /**
   * How many logical shards keys are spread over: a shard key `k` goes to shard
   * `k mod logicalShards` (strings are hashed first). Decided once, at launch, and never changed:
   * it is baked into every ID. Rows move between servers by moving logical shards, not by
   * changing this. At most `layout.shardCount`.
   */
  readonly logicalShards: number
}

/** {@link Sharding.toJSON}'s shape, and what installers record in the database. */
export interface ShardingDescription {
  readonly layout: LayoutDescription
  readonly logicalShards: number
}

/**
 * Where a row's shard comes from, the same in every ORM adapter.
 * - `shardBy`: a field (or function) holding a plain {@link ShardKey} (a tenant id, an email).
 *   The shard is `key mod logicalShards`, or the key's hash for strings. A field that holds
 *   another sharded row's ID is refused when the entity is defined: use `sameShardAs`.
 * - `sameShardAs`: a relation or a foreign-key field holding a sharded parent's ID; the row goes
 *   where the parent is (comments with their post). The shard is read from the parent's ID.
 * - `shard`: a fixed logical shard.
 */
export type ShardRule<T = Record<string, unknown>> = (
  | {
      readonly shardBy: (keyof T & string) | ((entity: T) => ShardKey | null | undefined)
      /** @default 'auto' */
      readonly stringKeys?: StringKeyMode
    }
  | { readonly sameShardAs: (keyof T & string) | ((entity: T) => IdInput | null | undefined) }
  | { readonly shard: number }
) &
  ShardColumnOption

/**
 * The `shardColumn` option every shard rule may carry.
 * @example
 * ```ts
 * import type { ShardRule } from '@shardflake/core'
 *
 * const rule: ShardRule<{ tenantId: string; lshard: number }> = { shardBy: 'tenantId', shardColumn: 'lshard' }
 * ```
 */
export type ShardColumnOption = {
  /**
   * A property (an integer column) that receives the logical shard of the row's ID on every
   * insert, for engines that route by a whole column value (Citus, Vitess, PgDog) and cannot read
   * the shard out of the middle of a 64-bit ID. A value the caller sets must be the ID's shard
   * (`MisplacedIdError`), and an update may not change it (`ShardKeyChangedError`).
   *
   * A plain `string`, not a key of the row type: adapters that infer the row type from the field
   * the rule names would otherwise refuse every other name. Each adapter checks it against the
   * entity when it is defined.
   * @default undefined (no such column)
   */
  readonly shardColumn?: string
}

/**
 * The layout and the number of logical shards of an application, decided once and handed to
 * every source and adapter, so that one key lands on one shard whoever writes the row.
 * Database installers record it, and database sources compare it with what they find there
 * (`ShardingMismatchError`).
 *
 * @example
 * ```ts
 * import { defineSharding, instagram } from '@shardflake/core'
 *
 * export const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * sharding.shardForKey(31341n) // 1341, as in "Sharding & IDs at Instagram"
 * ```
 */
export class Sharding {
  readonly layout: Layout
  readonly logicalShards: number

  /** @throws InvalidArgumentError when `logicalShards` is not an integer from 1 to `layout.shardCount`. */
  constructor(options: ShardingOptions) {
    const { layout, logicalShards } = options ?? {}
    if (!layout || typeof layout.shardOf !== 'function') {
      throw new InvalidArgumentError('defineSharding needs a layout (defineLayout, or a preset).')
    }
    if (
      !Number.isSafeInteger(logicalShards) ||
      logicalShards < 1 ||
      logicalShards > layout.shardCount
    ) {
      throw new InvalidArgumentError(
        `logicalShards must be an integer from 1 to ${layout.shardCount} (the shards layout ${JSON.stringify(layout.name)} can address), got ${describeValue(logicalShards)}. Pick it once, at launch: it decides where every key goes.`,
      )
    }
    this.layout = layout
    this.logicalShards = logicalShards
    Object.freeze(this)
  }

  /**
   * The logical shard of a key: integers (and digit strings, in `'auto'` mode) modulo
   * `logicalShards`, other strings by their FNV-1a hash.
   * @throws MissingShardKeyError for `null`, `undefined`, and an empty or blank string.
   */
  shardForKey(key: ShardKey | null | undefined, mode: StringKeyMode = 'auto'): number {
    return shardForKey(key, this.logicalShards, mode)
  }

  /**
   * The logical shard a row with this ID lives on, read from the ID.
   * @throws InvalidIdError for a value that is not an ID of the layout.
   * @throws ShardOutOfRangeError when the ID's shard is not one of the logical shards.
   */
  shardOfId(id: IdInput): number {
    const shard = this.layout.shardOf(id)
    // The message names the ID: spelled out only when it is needed.
    return shard < this.logicalShards ? shard : this.checkShard(shard, `ID ${String(id)}`)
  }

  /**
   * Throws unless `shard` is one of the logical shards (0 to `logicalShards - 1`).
   * @returns the shard
   * @throws ShardOutOfRangeError
   */
  checkShard(shard: number, what = 'Shard'): number {
    if (!Number.isInteger(shard) || shard < 0 || shard >= this.logicalShards) {
      throw new ShardOutOfRangeError(
        shard,
        `${what === 'Shard' ? 'Shard' : `${what} is on shard`} ${describeValue(shard)}, outside the ${this.logicalShards} logical shards (0 to ${this.logicalShards - 1}).`,
      )
    }
    return shard
  }

  /**
   * Applies a {@link ShardRule} to one new row. Adapters call it for every row they place.
   * @param entityName named in error messages.
   * @throws MissingShardKeyError when the rule's field is `null`, `undefined`, or an empty or blank
   *   string.
   * @throws ShardOutOfRangeError when the result is not one of the logical shards.
   */
  resolveShard<T>(rule: ShardRule<T>, entity: T, entityName?: string): number {
    if (typeof rule !== 'object' || rule === null) checkShardRule(rule, entityName ?? 'the row')
    if ('shard' in rule) return this.checkShard(rule.shard)
    if ('sameShardAs' in rule) {
      const ref = rule.sameShardAs
      const parent =
        typeof ref === 'function' ? ref(entity) : fieldOf(entity, ref, entityName, rule)
      if (parent === null || parent === undefined) {
        throw new MissingShardKeyError(
          `The parent ID${whereOf(entityName)} (${typeof ref === 'function' ? 'sameShardAs function' : `field '${ref}'`}) is missing: the row's shard comes from it. Set it before saving.`,
        )
      }
      return this.shardOfId(toBigInt(parent as IdInput, `Parent ID${whereOf(entityName)}`))
    }
    const ref = rule.shardBy
    const key = typeof ref === 'function' ? ref(entity) : fieldOf(entity, ref, entityName, rule)
    if (key === null || key === undefined || (typeof key === 'string' && key.trim() === '')) {
      throw new MissingShardKeyError(
        `The shard key${whereOf(entityName)} (${typeof ref === 'function' ? 'shardBy function' : `field '${ref}'`}) is ${typeof key === 'string' ? 'an empty or blank string' : 'missing'}: set it before saving, or give the ID yourself.`,
      )
    }
    if (typeof key !== 'bigint' && typeof key !== 'number' && typeof key !== 'string') {
      throw new InvalidArgumentError(
        `The shard key${whereOf(entityName)} must be a bigint, number or string, got ${typeof key}.`,
      )
    }
    return this.shardForKey(key, rule.stringKeys)
  }

  /** True when both make the same IDs and place the same keys on the same shards. */
  equals(other: Sharding | ShardingDescription): boolean {
    if (typeof other !== 'object' || other === null) return false
    return other.logicalShards === this.logicalShards && this.layout.equals(other.layout)
  }

  /**
   * Throws unless `other` (another source's sharding, or what an installer recorded in a
   * database) equals this one.
   * @param what names the other side in the message ("database app_0003", "the source of shards 0-99").
   * @throws ShardingMismatchError
   */
  checkSame(other: Sharding | ShardingDescription, what: string): void {
    if (this.equals(other)) return
    throw new ShardingMismatchError(
      `${what} uses ${describe(other)}, but this application uses ${describe(this)}. Keys would land on different shards depending on who writes the row: use one defineSharding({ layout, logicalShards }) everywhere${what.startsWith('database') || what.startsWith('server') ? ', the one it was installed with' : ''}.`,
    )
  }

  /** A short description for messages: layout and logical shards. */
  toString(): string {
    return describe(this)
  }

  /** Plain data, as installers record it. */
  toJSON(): ShardingDescription {
    return { layout: this.layout.toJSON(), logicalShards: this.logicalShards }
  }
}

/** ` of Post` for the messages of an entity's rule; built only for a message. */
function whereOf(entityName: string | undefined): string {
  return entityName ? ` of ${entityName}` : ''
}

/**
 * The field of a row a rule names.
 * @throws InvalidShardRuleError when the rule's field is not a string (a rule that skipped
 *   {@link checkShardRule}).
 * @throws InvalidArgumentError when the row is not an object.
 */
function fieldOf(
  entity: unknown,
  field: string,
  entityName: string | undefined,
  rule: ShardRule<never>,
): unknown {
  if (typeof field !== 'string') checkShardRule(rule, entityName ?? 'the row')
  if ((typeof entity !== 'object' && typeof entity !== 'function') || entity === null) {
    throw new InvalidArgumentError(
      `The row${whereOf(entityName)} must be an object to read its field '${field}', got ${describeValue(entity)}.`,
    )
  }
  return (entity as Record<string, unknown>)[field]
}

function describe(sharding: Sharding | ShardingDescription): string {
  const layout = (sharding as Partial<ShardingDescription> | null)?.layout
  if (typeof layout !== 'object' || layout === null) {
    return `${describeValue(sharding)} (not a sharding)`
  }
  // Read from a database or another process: any field may be of any type.
  const { name, timeBits, shardBits, workerBits, sequenceBits, epoch } = layout
  const bits = [timeBits, shardBits, workerBits, sequenceBits].map(describeValue).join('/')
  return `layout ${describeValue(name)} (${bits} bits, epoch ${describeInstant(epoch)}) with logicalShards ${describeValue(sharding.logicalShards)}`
}

/**
 * The `sharding` option of a source, installer or generator, checked: none has a default, so
 * that one key lands on one shard whoever makes its ID.
 * @param who what needs it, for the message: `'MysqlSource'`, `'The PostgreSQL SQL'`.
 * @throws ConfigurationError naming `logicalShards` when it is missing or not a sharding.
 */
export function requireSharding(sharding: unknown, who: string): Sharding {
  const candidate = sharding as Partial<Sharding> | undefined
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.logicalShards !== 'number' ||
    typeof candidate.layout?.shardOf !== 'function' ||
    typeof candidate.checkSame !== 'function'
  ) {
    throw new ConfigurationError(
      `${who} needs the application's sharding: pass { sharding: defineSharding({ layout, logicalShards }) }. There is no default logicalShards: it decides which shard every key lands on, so the application picks it once and hands the same sharding to every source, installer and adapter.`,
    )
  }
  return candidate as Sharding
}

/**
 * Decides the sharding of an application: its layout and how many logical shards keys are
 * spread over. Hand the result to every source and adapter.
 * @throws InvalidArgumentError
 * @example
 * ```ts
 * import { defineSharding, instagram, InProcessSource } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const source = new InProcessSource({ sharding, shards: 'all' })
 * source.nextId(sharding.shardForKey(31341n))
 * ```
 */
export function defineSharding(options: ShardingOptions): Sharding {
  return new Sharding(options)
}

/** The properties of a {@link ShardRule}. */
const RULE_OPTIONS = ['shardBy', 'stringKeys', 'sameShardAs', 'shard', 'shardColumn'] as const

/**
 * Throws unless `rule` is a well-formed {@link ShardRule}: exactly one of `shardBy`,
 * `sameShardAs`, `shard`, naming a field or giving a function, and `stringKeys` (with `shardBy`
 * only) `'auto'` or `'hash'`, and `shardColumn`, when given, a property name other than the rule's
 * field ({@link checkShardColumn}). Adapters call it when an entity is defined.
 * @param otherOptions when given, the other options the object may carry besides the rule (a
 *   decorator's column options); any other property is refused as a misspelling, naming the
 *   closest known one.
 * @throws InvalidShardRuleError
 * @throws InvalidArgumentError for an unknown property, when `otherOptions` is given.
 */
export function checkShardRule(
  rule: unknown,
  entityName: string,
  otherOptions?: readonly string[],
): ShardRule<never> {
  const fail = (why: string): never => {
    throw new InvalidShardRuleError(
      `The shard rule of ${entityName} ${why}. Give exactly one of { shardBy: 'field' } (a plain key such as a tenant id), { sameShardAs: 'parent' } (a relation or foreign key holding a sharded parent's ID) or { shard: n }.`,
    )
  }
  if (typeof rule !== 'object' || rule === null) return fail('is missing')
  if (otherOptions) {
    checkKnownOptions(`The shard rule of ${entityName}`, rule, [...RULE_OPTIONS, ...otherOptions])
  }
  const stringKeys = (rule as Record<string, unknown>).stringKeys
  if (stringKeys !== undefined && stringKeys !== 'auto' && stringKeys !== 'hash') {
    return fail(`has stringKeys ${describeValue(stringKeys)}, neither 'auto' nor 'hash'`)
  }
  const keys = ['shardBy', 'sameShardAs', 'shard'].filter(
    (key) => (rule as Record<string, unknown>)[key] !== undefined,
  )
  if (keys.length !== 1) {
    return fail(keys.length === 0 ? 'names no field' : `has ${keys.join(' and ')}`)
  }
  const value = (rule as Record<string, unknown>)[keys[0]!]
  if (stringKeys !== undefined && keys[0] !== 'shardBy') {
    return fail(`has stringKeys with ${keys[0]}: it says how shardBy reads string keys`)
  }
  if (keys[0] === 'shard') {
    if (!Number.isInteger(value) || (value as number) < 0) {
      return fail(`has shard ${describeValue(value)}, not a shard number`)
    }
  } else if (typeof value === 'string' ? value.length === 0 : typeof value !== 'function') {
    return fail(`has ${keys[0]} ${describeValue(value)}, neither a field name nor a function`)
  }
  checkShardColumn(rule, entityName)
  return rule as ShardRule<never>
}

/**
 * The error for `shardBy` on a field that holds a sharded row's ID: the modulo would read the
 * ID's sequence bits and scatter the children away from their parent. Adapters throw it when
 * the entity is defined.
 */
export function shardByOnShardedIdError(
  entityName: string,
  field: string,
  parentName: string,
  relation?: string,
): InvalidShardRuleError {
  return new InvalidShardRuleError(
    `${entityName}: shardBy '${field}' holds the ID of ${parentName}, which is itself a sharded ID. Its shard is in the ID's shard bits, not in its value modulo logicalShards: use { sameShardAs: '${relation ?? field}' } to put each ${entityName} on its ${parentName}'s shard.`,
  )
}

/** A rule in words, for messages. */
export function describeShardRule(rule: ShardRule<never>): string {
  if ('shard' in rule) return `shard ${rule.shard}`
  if ('sameShardAs' in rule) {
    return `sameShardAs ${typeof rule.sameShardAs === 'function' ? '(function)' : `'${rule.sameShardAs}'`}`
  }
  return `shardBy ${typeof rule.shardBy === 'function' ? '(function)' : `'${rule.shardBy}'`}`
}
