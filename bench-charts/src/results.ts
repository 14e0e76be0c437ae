/**
 * The results JSON a benchmark writes, one file per chart.
 *
 * @example
 * ```ts
 * import type { BenchResults } from '@shardflake/bench-charts'
 *
 * const results: BenchResults = {
 *   title: 'RedisSource against INCR',
 *   unit: 'IDs/s',
 *   baseline: 'INCR',
 *   rows: [
 *     { label: 'INCR', values: [10_983, 9_235] },
 *     { label: 'nextId', values: [5_457, 3_108] },
 *   ],
 * }
 * ```
 */
export interface BenchResults {
  /** The chart's title. */
  title: string
  /** What a value measures, such as `IDs/s`; shown when there is no baseline. */
  unit: string
  /** A line (or lines) under the title: the machine, the load, the date. */
  note?: string | string[]
  /**
   * The label of the row every other row is divided by, round by round (values[i] / baseline[i]).
   * With groups, each group has a row of this label. Without it, the chart shows the values.
   */
  baseline?: string
  /** What one entry of `values` is: `round` (the default), or `run` when each is a run's median. */
  roundName?: string
  /** `log` or `linear`; by default `log` when the largest value is over 20 times the smallest. */
  scale?: 'log' | 'linear'
  rows: BenchRow[]
}

export interface BenchRow {
  label: string
  /** Rows of one group share a panel and a baseline. */
  group?: string
  /** One value per round, in run order; one value when only a summary was kept. */
  values: number[]
}

/** Checks a parsed results JSON; the message names the first thing that is wrong. */
export function readResults(input: unknown, where = 'results'): BenchResults {
  const fail = (what: string): never => {
    throw new TypeError(`${where}: ${what}`)
  }
  if (typeof input !== 'object' || input === null) fail('expected an object')
  const data = input as Record<string, unknown>
  for (const key of ['title', 'unit'] as const) {
    if (typeof data[key] !== 'string') fail(`"${key}" must be a string`)
  }
  for (const key of ['baseline', 'roundName'] as const) {
    if (data[key] !== undefined && typeof data[key] !== 'string')
      fail(`"${key}" must be a string when given`)
  }
  const note = data.note
  if (
    note !== undefined &&
    typeof note !== 'string' &&
    !(Array.isArray(note) && note.every((line) => typeof line === 'string'))
  )
    fail('"note" must be a string or an array of strings when given')
  if (data.scale !== undefined && data.scale !== 'log' && data.scale !== 'linear')
    fail('"scale" must be "log" or "linear" when given')
  if (!Array.isArray(data.rows) || data.rows.length === 0) fail('"rows" must be a non-empty array')
  const rows = data.rows as unknown[]
  const seen = new Set<string>()
  rows.forEach((row, index) => {
    const at = `rows[${index}]`
    if (typeof row !== 'object' || row === null) fail(`${at} must be an object`)
    const { label, group, values } = row as Record<string, unknown>
    if (typeof label !== 'string' || label === '') fail(`${at}.label must be a non-empty string`)
    if (group !== undefined && typeof group !== 'string') fail(`${at}.group must be a string`)
    if (!Array.isArray(values) || values.length === 0)
      fail(`${at}.values must be a non-empty array`)
    for (const value of values as unknown[]) {
      if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)
        fail(`${at}.values must hold positive finite numbers`)
    }
    const key = `${group ?? ''}\u0000${label}`
    if (seen.has(key)) fail(`${at}: the label "${label}" appears twice in one group`)
    seen.add(key)
  })
  return data as unknown as BenchResults
}
