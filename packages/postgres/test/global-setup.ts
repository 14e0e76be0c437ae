import { startPostgres } from '@shardflake/conformance'
import type { TestProject } from 'vitest/node'

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a second PostgreSQL server, started for this run on a free port. */
    secondServerUrl: string
  }
}

/**
 * Starts a second, real PostgreSQL server for the many-servers tests (a throwaway cluster on a
 * free port, so two runs never meet), and stops it afterwards. `PG_SECOND_URL` names one instead.
 * When it cannot start, the run fails with the server's log: a second database on the main server
 * would not test what these tests claim.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (process.env.PG_SECOND_URL) {
    project.provide('secondServerUrl', process.env.PG_SECOND_URL)
    return async () => undefined
  }
  const server = await startPostgres()
  project.provide('secondServerUrl', server.url)
  return () => server.stop()
}
