import {
  blogSchemaSql,
  type Dialect,
  freshDatabase,
  type RawDatabase,
} from '@shardflake/conformance'

/** A fresh database with the suite's blog tables plus `profiles` (one per author). */
export async function blogDatabase(dialect: Dialect, name: string): Promise<RawDatabase> {
  const raw = await freshDatabase(dialect, name)
  const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
  for (const statement of [
    'DROP TABLE IF EXISTS profiles',
    ...blogSchemaSql(dialect),
    `CREATE TABLE profiles (id BIGINT NOT NULL PRIMARY KEY, author_id BIGINT NOT NULL UNIQUE REFERENCES authors (id), bio ${text} NOT NULL)`,
  ]) {
    await raw.query(statement)
  }
  return raw
}
