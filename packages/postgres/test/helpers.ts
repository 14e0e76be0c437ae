import pg from 'pg'

/** The main server (a database on it is created per test file). */
export const PG_URL = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}

/** Creates (or recreates) database `name` on the server of `serverUrl`; returns its URL. */
export async function createDatabase(name: string, serverUrl = PG_URL): Promise<string> {
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    await admin.query(`CREATE DATABASE "${name}"`)
  } finally {
    await admin.end()
  }
  return withDatabase(serverUrl, name)
}

export async function dropDatabase(name: string, serverUrl = PG_URL): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
  } finally {
    await admin.end()
  }
}

/** Runs `sql` on a fresh raw connection (the verifier, not the code under test). */
export async function raw<T = Record<string, unknown>>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(sql, params)).rows as T[]
  } finally {
    await client.end()
  }
}
