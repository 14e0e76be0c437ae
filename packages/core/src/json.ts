/**
 * A `JSON.stringify` replacer that writes every `bigint` as a decimal string, the way Discord's
 * and Twitter's APIs send 64-bit IDs (JavaScript clients lose precision on numbers above 2^53).
 * Without it `JSON.stringify` throws "Do not know how to serialize a BigInt".
 *
 * @example
 * ```ts
 * JSON.stringify({ id: 1387263000905n }, jsonReplacer) // '{"id":"1387263000905"}'
 * ```
 */
export function jsonReplacer(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value
}

/**
 * `JSON.stringify` with {@link jsonReplacer}: IDs become strings, nothing else changes.
 *
 * @example
 * ```ts
 * res.type('json').send(stringifyIds(post))
 * ```
 */
export function stringifyIds(value: unknown, space?: number | string): string {
  return JSON.stringify(value, jsonReplacer, space)
}
