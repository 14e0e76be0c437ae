/**
 * SQL that creates or changes shardflake's objects in a database, as every SQL generator of
 * every source package returns it: run `statements` one by one through a driver, or hand
 * `script` to a migration tool or a database client.
 */
export interface Ddl {
  /** Each statement on its own, without a trailing delimiter: what a driver's `query()` takes. */
  readonly statements: readonly string[]
  /** The whole script, as a client such as `psql` or `mariadb` reads it. */
  readonly script: string
}

/**
 * A {@link Ddl} from statements. `delimiter` ends each statement in the script (MySQL routines
 * need a `DELIMITER` block, which the script then includes).
 * @example
 * ```ts
 * import { toDdl } from '@shardflake/core'
 *
 * const ddl = toDdl(['CREATE SCHEMA app_0001', 'CREATE TABLE app_0001.t (id bigint)'])
 * ddl.script // 'CREATE SCHEMA app_0001;\nCREATE TABLE app_0001.t (id bigint);\n'
 * ```
 */
export function toDdl(statements: readonly string[], options: { delimiter?: string } = {}): Ddl {
  const delimiter = options.delimiter ?? ';'
  const body = statements.map((statement) => `${statement.trimEnd()}${delimiter}\n`).join('\n')
  const script = delimiter === ';' ? body : `DELIMITER ${delimiter}\n${body}DELIMITER ;\n`
  return Object.freeze({ statements: Object.freeze([...statements]), script })
}
