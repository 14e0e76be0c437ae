import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { DMMF, GeneratorManifest, GeneratorOptions } from '@prisma/generator-helper'
import { ConfigurationError, InvalidShardRuleError, type ShardRule } from '@shardflake/core'
import {
  checkModels,
  LOOKALIKE,
  type ModelMetadata,
  parseShardedId,
  type RelationMetadata,
  type ShardedModels,
} from './metadata'

const KEY_TYPES = new Set(['BigInt', 'Int', 'String'])

/**
 * The metadata of every model of a schema, read from Prisma's full DMMF: the field annotated
 * `/// @shardedId(...)` with its rule, and every relation field. This is what the generator
 * writes; it is exported for tools that hold a DMMF themselves.
 * @throws InvalidShardRuleError for a misspelt or malformed annotation, or a rule that does not
 *   mean what it says (`shardBy` on a key holding a sharded parent's ID: use `sameShardAs`).
 * @throws ConfigurationError for an annotation on a field that is not a `BigInt @id`, a rule
 *   naming a missing field, or two sharded IDs in one model.
 */
export function modelsFromDmmf(datamodel: DMMF.Datamodel): ShardedModels {
  const models: Record<string, ModelMetadata> = {}
  for (const model of datamodel.models) {
    if (parseShardedId(model.documentation, model.name)) {
      throw new InvalidShardRuleError(
        `${model.name}: @shardedId goes on the ID field (a /// line above it), not on the model.`,
      )
    }
    let sharded: { id: string; rule: ShardRule } | undefined
    const relations: Record<string, RelationMetadata> = {}
    for (const field of model.fields) {
      if (field.kind === 'object') {
        relations[field.name] = {
          model: field.type,
          ...(field.isList && { list: true }),
          ...(field.relationName && { relationName: field.relationName }),
          ...(field.relationFromFields?.length && {
            fields: [...field.relationFromFields],
            references: [...(field.relationToFields ?? [])],
          }),
        }
      }
      const where = `${model.name}.${field.name}`
      const annotation = parseShardedId(field.documentation, where)
      if (!annotation) continue
      if (sharded) {
        throw new ConfigurationError(`${where}: model ${model.name} has two @shardedId fields.`)
      }
      if (field.type !== 'BigInt' || field.kind !== 'scalar' || field.isList) {
        throw new ConfigurationError(
          `${where}: @shardedId goes on a BigInt field (IDs exceed 2^53), not ${field.type}.`,
        )
      }
      if (!field.isId && !field.isUnique) {
        throw new ConfigurationError(`${where}: @shardedId goes on the @id (or a @unique) field.`)
      }
      const { stringKeys, shardColumn, ...rule } = annotation
      const ref = rule.shardBy ?? rule.sameShardAs
      if (ref !== undefined && !model.fields.some((f) => f.name === ref)) {
        throw new ConfigurationError(
          `${where}: @shardedId names '${ref}', which ${model.name} does not have.`,
        )
      }
      if (shardColumn !== undefined) {
        const target = model.fields.find((f) => f.name === shardColumn)
        if (!target) {
          throw new InvalidShardRuleError(
            `${where}: @shardedId has shardColumn '${shardColumn}', which ${model.name} does not have. Add an Int field for the logical shard of each row's ID.`,
          )
        }
        if (target.kind !== 'scalar' || target.type !== 'Int' || target.isList) {
          throw new ConfigurationError(
            `${where}: shardColumn '${shardColumn}' is a ${target.type}; it holds the logical shard of the row's ID: make it an Int.`,
          )
        }
      }
      const column = shardColumn === undefined ? {} : { shardColumn }
      sharded = {
        id: field.name,
        rule:
          rule.shard !== undefined
            ? { shard: rule.shard, ...column }
            : rule.sameShardAs !== undefined
              ? { sameShardAs: rule.sameShardAs, ...column }
              : { shardBy: rule.shardBy!, ...(stringKeys && { stringKeys }), ...column },
      }
    }
    models[model.name] = { ...sharded, relations }
  }
  const checked = checkModels(models)
  for (const model of datamodel.models) {
    const rule = checked[model.name]?.rule
    if (!rule || 'shard' in rule) continue
    const ref = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
    const key = model.fields.find((f) => f.name === ref)
    if (!key) continue
    if ('shardBy' in rule && !KEY_TYPES.has(key.type)) {
      throw new ConfigurationError(
        `${model.name}: shardBy '${key.name}' is a ${key.type}; shard keys are BigInt, Int or String fields.`,
      )
    }
    if ('sameShardAs' in rule && key.type !== 'BigInt') {
      throw new InvalidShardRuleError(
        `${model.name}: sameShardAs '${key.name}' is a ${key.type}; it must hold a parent's sharded ID, a BigInt.`,
      )
    }
  }
  return checked
}

/**
 * Refuses a `//` comment that starts with `@shardedId` (or a misspelling of it): Prisma drops
 * such comments from the DMMF, and the model would silently go unsharded. Prose that mentions
 * the annotation further into a comment is left alone.
 * @throws InvalidShardRuleError
 */
export function checkPlainComments(schema: string, file = 'schema.prisma'): void {
  schema.split(/\r?\n/).forEach((line, index) => {
    const comment = /(?<![/:])\/\/(?!\/)(.*)$/.exec(line)
    if (comment && new RegExp(`^\\s*${LOOKALIKE.source}`, 'i').test(comment[1]!)) {
      throw new InvalidShardRuleError(
        `${file}:${index + 1}: "${line.trim()}" is a // comment, which Prisma ignores: write the annotation in a /// comment on the line above the ID field.`,
      )
    }
  })
}

/** The files of the generated module: `index.ts`, or `index.js` + `index.d.ts`. */
export interface RenderedModels {
  readonly ts: string
  readonly js: string
  readonly dts: string
}

/**
 * The module the generator writes: `models` (the metadata) and `shardedIds`, the extension with
 * those models bound, so an app writes `prisma.$extends(shardedIds({ source }))` and passes no
 * metadata. `importFrom` is where `shardedIds` comes from.
 * @default importFrom '@shardflake/prisma'
 */
export function renderModels(
  models: ShardedModels,
  schemaPath?: string,
  importFrom = '@shardflake/prisma',
): RenderedModels {
  const header = [
    `// Written by @shardflake/prisma${schemaPath ? ` from ${schemaPath}` : ''} at prisma generate. Do not edit.`,
    "// prisma.$extends(shardedIds({ source })): the extension with this schema's models.",
  ].join('\n')
  const from = JSON.stringify(importFrom)
  const body = JSON.stringify(models, null, 2)
  const doc = [
    '/**',
    ' * The sharded-ID extension for this schema: `prisma.$extends(shardedIds({ source }))`.',
    ' * Takes every option of `shardedIds` from @shardflake/prisma except `models`.',
    ' */',
  ].join('\n')
  const ts = [
    header,
    `import { type ShardedIdsOptions, shardedIds as withModels } from ${from}`,
    '',
    `export const models = ${body} as const`,
    '',
    doc,
    "export function shardedIds(options: Omit<ShardedIdsOptions<typeof models>, 'models'>) {",
    '  return withModels({ ...options, models })',
    '}',
    '',
  ].join('\n')
  const js = [
    header,
    `import { shardedIds as withModels } from ${from}`,
    '',
    `export const models = ${body}`,
    '',
    doc,
    'export function shardedIds(options) {',
    '  return withModels({ ...options, models })',
    '}',
    '',
  ].join('\n')
  const dts = [
    header,
    `import type { ShardedIdsOptions, shardedIds as withModels } from ${from}`,
    '',
    `export declare const models: ${body}`,
    '',
    doc,
    "export declare function shardedIds(options: Omit<ShardedIdsOptions<typeof models>, 'models'>): ReturnType<typeof withModels<typeof models>>",
    '',
  ].join('\n')
  return { ts, js, dts }
}

/** The generator's manifest: output defaults to `./generated/shardflake` next to the schema. */
export function manifest(): GeneratorManifest {
  return { prettyName: 'shardflake sharded IDs', defaultOutput: './generated/shardflake' }
}

/**
 * What `prisma generate` calls: writes `index.ts` (and, with `format = "js"` in the generator
 * block, `index.js` + `index.d.ts`) into the generator's output folder.
 *
 * @example schema.prisma
 * ```prisma
 * generator shardflake {
 *   provider = "shardflake-prisma-generator"
 *   output   = "../src/generated/shardflake"
 * }
 * ```
 */
export async function generate(options: GeneratorOptions): Promise<void> {
  const output = options.generator.output?.value
  if (!output) throw new ConfigurationError('The shardflake generator needs an output folder.')
  checkPlainComments(options.datamodel, options.schemaPath.split(/[\\/]/).pop())
  const models = modelsFromDmmf(options.dmmf.datamodel)
  const { importFrom } = options.generator.config
  const files = renderModels(
    models,
    options.schemaPath.split(/[\\/]/).pop(),
    typeof importFrom === 'string' ? importFrom : undefined,
  )
  await mkdir(output, { recursive: true })
  if (options.generator.config.format === 'js') {
    await writeFile(join(output, 'index.js'), files.js)
    await writeFile(join(output, 'index.d.ts'), files.dts)
  } else {
    await writeFile(join(output, 'index.ts'), files.ts)
  }
}
