import { execFileSync } from 'node:child_process'
import type { TestProject } from 'vitest/node'

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a second PostgreSQL server started for the tests, or '' when none could be. */
    secondServerUrl: string
  }
}

const CLUSTER = 'sf_pg_second'

/**
 * Starts a second, real PostgreSQL server (`pg_createcluster` on another port) for the
 * many-servers test, and drops it afterwards. Where that is impossible (not root, no
 * postgresql-common), the test falls back to a second database on the main server.
 */
export default function setup(project: TestProject): () => void {
  if (process.env.PG_SECOND_URL) {
    project.provide('secondServerUrl', process.env.PG_SECOND_URL)
    return () => undefined
  }
  let version = ''
  try {
    version =
      execFileSync('pg_lsclusters', ['-h'], { encoding: 'utf8' }).trim().split(/\s+/)[0] ?? ''
    const port = String(54_300 + (process.pid % 90))
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
