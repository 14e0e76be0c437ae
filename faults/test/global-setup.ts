import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestProject } from 'vitest/node'
import { mergeRun, renderFigures } from '../src/figures'

declare module 'vitest' {
  export interface ProvidedContext {
    runDir: string
  }
}

/**
 * Gives every test file one run directory (figures and IDs of each scenario), and at the end
 * checks that no ID repeats over all scenarios, then writes the figures: to `FAULTS_FIGURES` when
 * set, and to the console.
 */
export default function setup(project: TestProject) {
  const runDir = mkdtempSync(join(tmpdir(), 'shardflake-faults-run-'))
  const startedAt = Date.now()
  project.provide('runDir', runDir)
  return () => {
    const run = mergeRun(runDir)
    const text = renderFigures(run, Date.now() - startedAt)
    if (process.env.FAULTS_FIGURES) writeFileSync(process.env.FAULTS_FIGURES, text)
    console.log(`\n${text}`)
    rmSync(runDir, { recursive: true, force: true })
    if (run.repeats > 0) {
      throw new Error(
        `${run.repeats} IDs were issued twice across scenarios, e.g. ${run.examples.join(', ')}`,
      )
    }
  }
}
