import type { BenchResults } from './results.ts'

/** One row as drawn: the median and the spread (min..max) across rounds. */
export interface RowSummary {
  label: string
  group: string
  isBaseline: boolean
  rounds: number
  median: number
  min: number
  max: number
  /** The median as printed beside its mark: `0.46×` against a baseline, `10,983 IDs/s` without. */
  text: string
}

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

export const formatRatio = (ratio: number): string =>
  `${ratio >= 100 ? ratio.toFixed(0) : ratio >= 10 ? ratio.toFixed(1) : ratio.toFixed(2)}×`

export const formatValue = (value: number, unit: string): string =>
  `${Math.round(value).toLocaleString('en')} ${unit}`

/**
 * Divides each row by its group's baseline round by round (both measured in the same round, so
 * load that drifts during a run cancels), then takes the median and min..max of those ratios.
 * Without a baseline, summarizes the values themselves.
 */
export function summarize(results: BenchResults): RowSummary[] {
  const byGroup = new Map<string, BenchResults['rows']>()
  for (const row of results.rows) {
    const group = row.group ?? ''
    byGroup.set(group, [...(byGroup.get(group) ?? []), row])
  }
  return results.rows.map((row) => {
    const group = row.group ?? ''
    let series = row.values
    let isBaseline = false
    if (results.baseline !== undefined) {
      const base = byGroup.get(group)!.find((candidate) => candidate.label === results.baseline)
      if (!base) {
        throw new TypeError(
          `the baseline "${results.baseline}" is not a row${group ? ` of the group "${group}"` : ''}`,
        )
      }
      if (base.values.length !== row.values.length) {
        throw new TypeError(
          `"${row.label}" has ${row.values.length} rounds and its baseline ${base.values.length}: ratios are taken round by round`,
        )
      }
      isBaseline = base === row
      series = row.values.map((value, round) => value / base.values[round]!)
    }
    const middle = median(series)
    return {
      label: row.label,
      group,
      isBaseline,
      rounds: series.length,
      median: middle,
      min: Math.min(...series),
      max: Math.max(...series),
      text:
        results.baseline === undefined ? formatValue(middle, results.unit) : formatRatio(middle),
    }
  })
}
