import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Ledger, LedgerFigures } from './ledger'
import { countRepeats } from './repeats'

/** Rows written with acknowledged IDs in committed transactions, checked after the faults. */
export interface RowFigures {
  /** Rows whose transaction's COMMIT was acknowledged. */
  readonly committed: number
  /** Of those, rows not found afterwards (must be 0). */
  readonly lost: number
  /** Transactions whose COMMIT failed or never answered (their rows may or may not exist). */
  readonly uncertain: number
}

/** What one scenario (one test) did and saw. */
export interface ScenarioFigures {
  readonly scenario: string
  readonly durationMs: number
  readonly sources: readonly LedgerFigures[]
  /** Faults injected, by kind (restarts, kills, cancels, terminations, stops). */
  readonly faults: Record<string, number>
  readonly rows: Record<string, RowFigures>
  /** Repeated IDs within the scenario (must be 0). */
  readonly repeats: number
}

/** Counts injected faults by kind. */
export class FaultLog {
  readonly counts: Record<string, number> = {}
  add(kind: string, n = 1): void {
    this.counts[kind] = (this.counts[kind] ?? 0) + n
  }
}

/** Writes a scenario's figures and every ID it issued (one file per ID space) into the run directory. */
export function saveScenario(
  runDir: string,
  scenario: string,
  figures: Omit<ScenarioFigures, 'scenario' | 'repeats'>,
  ledgers: readonly Ledger[],
): ScenarioFigures {
  const file = scenario.replace(/[^a-z0-9]+/gi, '-').toLowerCase()
  let repeats = 0
  for (const space of new Set(ledgers.map((ledger) => ledger.space))) {
    const ids = concat(ledgers.filter((l) => l.space === space).map((ledger) => ledger.allIds()))
    repeats += countRepeats(ids).repeats
    writeFileSync(
      join(runDir, `${file}.${space}.ids`),
      new Uint8Array(ids.buffer, ids.byteOffset, ids.byteLength),
    )
  }
  const full: ScenarioFigures = { scenario, repeats, ...figures }
  writeFileSync(join(runDir, `${file}.json`), JSON.stringify(full, null, 2))
  return full
}

function concat(arrays: readonly BigUint64Array[]): BigUint64Array {
  const all = new BigUint64Array(arrays.reduce((n, a) => n + a.length, 0))
  let at = 0
  for (const array of arrays) {
    all.set(array, at)
    at += array.length
  }
  return all
}

/** Everything the run's scenarios saved: figures, and repeats over every ID of every scenario. */
export function mergeRun(runDir: string): {
  scenarios: ScenarioFigures[]
  ids: number
  repeats: number
  examples: bigint[]
} {
  if (!existsSync(runDir)) return { scenarios: [], ids: 0, repeats: 0, examples: [] }
  const files = readdirSync(runDir).sort()
  const scenarios = files
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(runDir, f), 'utf8')) as ScenarioFigures)
  // One check per ID space over every scenario's IDs of that space.
  const spaces = new Map<string, BigUint64Array[]>()
  for (const f of files.filter((name) => name.endsWith('.ids'))) {
    const space = f.split('.').at(-2) ?? ''
    const bytes = readFileSync(join(runDir, f))
    const copy = new Uint8Array(bytes.length)
    copy.set(bytes)
    spaces.set(space, [...(spaces.get(space) ?? []), new BigUint64Array(copy.buffer)])
  }
  let ids = 0
  let repeats = 0
  const examples: bigint[] = []
  for (const arrays of spaces.values()) {
    const all = concat(arrays)
    ids += all.length
    const found = countRepeats(all)
    repeats += found.repeats
    examples.push(...found.examples)
  }
  return { scenarios, ids, repeats, examples }
}

const fmt = (n: number) => n.toLocaleString('en-US')

/** The figures as Markdown tables. */
export function renderFigures(run: ReturnType<typeof mergeRun>, wallMs: number): string {
  const lines: string[] = []
  lines.push(
    `Run of ${new Date().toISOString()}: ${run.scenarios.length} scenarios, ${fmt(run.ids)} IDs acknowledged, ${fmt(run.repeats)} repeated over all of them; ${Math.round(wallMs / 1000)} s wall clock.`,
    '',
    '| scenario | source | calls | IDs | errors by code | untyped | max call ms | s |',
    '|---|---|---:|---:|---|---:|---:|---:|',
  )
  for (const s of run.scenarios) {
    for (const source of s.sources) {
      const errors = Object.entries(source.errors)
        .map(([code, n]) => `${code} ${fmt(n)}`)
        .join(', ')
      lines.push(
        `| ${s.scenario} | ${source.source} | ${fmt(source.calls)} | ${fmt(source.ids)} | ${errors || '-'} | ${source.untyped.length} | ${fmt(source.maxCallMs)} | ${Math.round(s.durationMs / 1000)} |`,
      )
    }
  }
  lines.push('', '| scenario | faults injected |', '|---|---|')
  for (const s of run.scenarios) {
    const faults = Object.entries(s.faults)
      .map(([kind, n]) => `${kind} ${fmt(n)}`)
      .join(', ')
    lines.push(`| ${s.scenario} | ${faults || '-'} |`)
  }
  const rows = run.scenarios.flatMap((s) =>
    Object.entries(s.rows).map(([table, r]) => ({ scenario: s.scenario, table, ...r })),
  )
  if (rows.length > 0) {
    lines.push(
      '',
      '| scenario | rows written with acknowledged IDs | committed | lost | commit unknown |',
      '|---|---|---:|---:|---:|',
    )
    for (const r of rows) {
      lines.push(
        `| ${r.scenario} | ${r.table} | ${fmt(r.committed)} | ${fmt(r.lost)} | ${fmt(r.uncertain)} |`,
      )
    }
  }
  const windows = run.scenarios.flatMap((s) =>
    s.sources.flatMap((source) =>
      source.windows.map((w) => ({ scenario: s.scenario, source: source.source, ...w })),
    ),
  )
  if (windows.length > 0) {
    lines.push(
      '',
      '| scenario | source | window | ms | calls started | IDs | errors | longest call ms |',
      '|---|---|---|---:|---:|---:|---:|---:|',
    )
    for (const w of windows) {
      lines.push(
        `| ${w.scenario} | ${w.source} | ${w.name} | ${fmt(w.durationMs)} | ${fmt(w.calls)} | ${fmt(w.ids)} | ${fmt(w.errors)} | ${fmt(w.maxCallMs)} |`,
      )
    }
  }
  const oldIds = run.scenarios.flatMap((s) =>
    s.sources.flatMap((source) =>
      source.wrongTimeExamples.map((example) => `${s.scenario}, ${source.source}, ${example}`),
    ),
  )
  if (oldIds.length > 0) {
    lines.push('', 'Batches whose IDs carry a time before the run (a counter that went back):', '')
    for (const example of oldIds) lines.push(`- ${example}`)
  }
  const untyped = run.scenarios.flatMap((s) => s.sources.flatMap((source) => source.untyped))
  if (untyped.length > 0) {
    lines.push('', 'Errors that were not a ShardflakeError with a fault code:', '')
    for (const u of untyped.slice(0, 20)) {
      lines.push(`- ${u.source}, ${u.what}: ${u.causes}`)
    }
  }
  return `${lines.join('\n')}\n`
}
