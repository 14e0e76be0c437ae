import { execFileSync } from 'node:child_process'
import { createServer } from 'node:net'
import type { TestProject } from 'vitest/node'

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a second PostgreSQL server started for the tests, or '' when none could be. */
    secondServerUrl: string
  }
}

/** Per run: two concurrent runs each start (and drop) their own. */
const CLUSTER = `sf_pg_second_${process.pid}`

/** A TCP port nothing listens on right now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/**
 * Starts a second, real PostgreSQL server (`pg_createcluster` on another port) for the
 * many-servers test, and drops it afterwards. Where that is impossible (not root, no
 * postgresql-common), the test falls back to a second database on the main server.
 */
export default async function setup(project: TestProject): Promise<() => void> {
  if (process.env.PG_SECOND_URL) {
    project.provide('secondServerUrl', process.env.PG_SECOND_URL)
    return () => undefined
  }
  let version = ''
  try {
    version =
      execFileSync('pg_lsclusters', ['-h'], { encoding: 'utf8' }).trim().split(/\s+/)[0] ?? ''
    const port = String(await freePort())
    drop(version)
    execFileSync('pg_createcluster', [version, CLUSTER, '-p', port, '--', '--auth=trust'], {
      stdio: 'ignore',
    })
    execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, CLUSTER, 'start'], {
      stdio: 'ignore',
    })
    project.provide('secondServerUrl', `postgres://postgres@127.0.0.1:${port}/postgres`)
  } catch (error) {
    console.warn(
      `[postgres tests] no second PostgreSQL server (${String(error)}); using a second database instead`,
    )
    project.provide('secondServerUrl', '')
  }
  return () => drop(version)
}

function drop(version: string): void {
  if (!version) return
  try {
    execFileSync('pg_dropcluster', ['--stop', version, CLUSTER], { stdio: 'ignore' })
  } catch {
    // not there
  }
}
