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
  if (typeof input !== 'object' || input === null) return fail('expected an object')
  const text = (key: string, value: unknown): string =>
    typeof value === 'string' ? value : fail(`"${key}" must be a string`)
  const optionalText = (key: string, value: unknown): string | undefined =>
    value === undefined ? undefined : text(key, value)
  const { title, unit, note, baseline, roundName, scale, rows } = input as Partial<
    Record<keyof BenchResults, unknown>
  >
  const heading = { title: text('title', title), unit: text('unit', unit) }
  let lines: string | string[] | undefined
  if (note !== undefined) {
    if (typeof note === 'string') lines = note
    else if (Array.isArray(note) && note.every((line) => typeof line === 'string')) lines = note
    else fail('"note" must be a string or an array of strings when given')
  }
  const base = optionalText('baseline', baseline)
  const round = optionalText('roundName', roundName)
  if (scale !== undefined && scale !== 'log' && scale !== 'linear') {
    fail('"scale" must be "log" or "linear" when given')
  }
  if (!Array.isArray(rows) || rows.length === 0) return fail('"rows" must be a non-empty array')
  const seen = new Set<string>()
  const checked: BenchRow[] = []
  for (const [index, row] of (rows as unknown[]).entries()) {
    const at = `rows[${index}]`
    if (typeof row !== 'object' || row === null) return fail(`${at} must be an object`)
    const { label, group, values } = row as Partial<Record<keyof BenchRow, unknown>>
    if (typeof label !== 'string' || label === '')
      return fail(`${at}.label must be a non-empty string`)
    if (group !== undefined && typeof group !== 'string')
      return fail(`${at}.group must be a string`)
    if (!Array.isArray(values) || values.length === 0) {
      return fail(`${at}.values must be a non-empty array`)
    }
    const numbers = values.map((value: unknown) =>
      typeof value === 'number' && Number.isFinite(value) && value > 0
        ? value
        : fail(`${at}.values must hold positive finite numbers`),
    )
    const key = `${group ?? ''}\u0000${label}`
    if (seen.has(key)) fail(`${at}: the label "${label}" appears twice in one group`)
    seen.add(key)
    checked.push({ label, ...(group === undefined ? {} : { group }), values: numbers })
  }
  // The keys in the order the shape declares them, so a tidied file reads like a written one.
  return {
    ...heading,
    ...(lines === undefined ? {} : { note: lines }),
    ...(base === undefined ? {} : { baseline: base }),
    ...(round === undefined ? {} : { roundName: round }),
    ...(scale === 'log' || scale === 'linear' ? { scale } : {}),
    rows: checked,
  }
}
