import {
  blogSchemaSql,
  type Dialect,
  freshDatabase,
  type RawDatabase,
} from '@shardflake/conformance'

/** A fresh database with the suite's blog tables plus `profiles` (one per author) and `members`. */
export async function blogDatabase(dialect: Dialect, name: string): Promise<RawDatabase> {
  const raw = await freshDatabase(dialect, name)
  const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
  for (const statement of [
    'DROP TABLE IF EXISTS profiles',
    'DROP TABLE IF EXISTS members',
    ...blogSchemaSql(dialect),
    `CREATE TABLE profiles (id BIGINT NOT NULL PRIMARY KEY, author_id BIGINT NOT NULL UNIQUE REFERENCES authors (id), bio ${text} NOT NULL)`,
    'CREATE TABLE members (id BIGINT NOT NULL PRIMARY KEY, email VARCHAR(200) NOT NULL UNIQUE, tenant INTEGER NOT NULL)',
  ]) {
    await raw.query(statement)
  }
  return raw
}
