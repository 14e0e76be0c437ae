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

/** `kind n, kind n, ...` of a record of counts, or `-`. */
const tally = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([kind, n]) => `${kind} ${fmt(n)}`)
    .join(', ') || '-'

/**
 * A Markdown table after a blank line: `columns` are its titles, a title ending in `:` is a
 * right-aligned (number) column. Nothing when there are no rows.
 */
function table(columns: readonly string[], rows: readonly (readonly (string | number)[])[]) {
  if (rows.length === 0) return []
  const line = (cells: readonly (string | number)[]) => `| ${cells.join(' | ')} |`
  return [
    '',
    line(columns.map((column) => column.replace(/:$/, ''))),
    `|${columns.map((column) => (column.endsWith(':') ? '---:' : '---')).join('|')}|`,
    ...rows.map(line),
  ]
}

/** A bulleted list after a title and a blank line. Nothing without items. */
function list(title: string, items: readonly string[]) {
  return items.length === 0 ? [] : ['', title, '', ...items.map((item) => `- ${item}`)]
}

/** The figures as Markdown tables. */
export function renderFigures(run: ReturnType<typeof mergeRun>, wallMs: number): string {
  const { scenarios } = run
  const sources = scenarios.flatMap((s) => s.sources.map((source) => ({ s, source })))
  const lines = [
    `Run of ${new Date().toISOString()}: ${scenarios.length} scenarios, ${fmt(run.ids)} IDs acknowledged, ${fmt(run.repeats)} repeated over all of them; ${Math.round(wallMs / 1000)} s wall clock.`,
    ...table(
      ['scenario', 'source', 'calls:', 'IDs:', 'errors by code', 'untyped:', 'max call ms:', 's:'],
      sources.map(({ s, source }) => [
        s.scenario,
        source.source,
        fmt(source.calls),
        fmt(source.ids),
        tally(source.errors),
        source.untyped.length,
        fmt(source.maxCallMs),
        Math.round(s.durationMs / 1000),
      ]),
    ),
    ...table(
      ['scenario', 'faults injected'],
      scenarios.map((s) => [s.scenario, tally(s.faults)]),
    ),
    ...table(
      ['scenario', 'rows written with acknowledged IDs', 'committed:', 'lost:', 'commit unknown:'],
      scenarios.flatMap((s) =>
        Object.entries(s.rows).map(([rows, r]) => [
          s.scenario,
          rows,
          fmt(r.committed),
          fmt(r.lost),
          fmt(r.uncertain),
        ]),
      ),
    ),
    ...table(
      [
        'scenario',
        'source',
        'window',
        'ms:',
        'calls started:',
        'IDs:',
        'errors:',
        'longest call ms:',
      ],
      sources.flatMap(({ s, source }) =>
        source.windows.map((w) => [
          s.scenario,
          source.source,
          w.name,
          fmt(w.durationMs),
          fmt(w.calls),
          fmt(w.ids),
          fmt(w.errors),
          fmt(w.maxCallMs),
        ]),
      ),
    ),
    ...list(
      'Batches whose IDs carry a time before the run (a counter that went back):',
      sources.flatMap(({ s, source }) =>
        source.wrongTimeExamples.map((example) => `${s.scenario}, ${source.source}, ${example}`),
      ),
    ),
    ...list(
      'Errors that were not a ShardflakeError with a fault code:',
      sources
        .flatMap(({ source }) => source.untyped)
        .slice(0, 20)
        .map((u) => `${u.source}, ${u.what}: ${u.causes}`),
    ),
  ]
  return `${lines.join('\n')}\n`
}
