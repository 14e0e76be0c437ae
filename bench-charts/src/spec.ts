import type { TopLevelSpec } from 'vega-lite'
import type { BenchResults } from './results.ts'
import { formatRatio, formatValue, summarize } from './summary.ts'

const BLUE = '#4c78a8'
const GREY = '#8a8a8a'

/** The Vega-Lite spec of a results chart: a dot per row at the median, a line over min..max. */
export function chartSpec(results: BenchResults): TopLevelSpec {
  const format = (value: number) =>
    results.baseline !== undefined ? formatRatio(value) : formatValue(value, results.unit)
  const rows = summarize(results).map((row) => ({
    ...row,
    kind: row.isBaseline ? 'baseline' : 'row',
    description:
      row.rounds > 1
        ? `${row.label}: ${row.text} (${format(row.min)}..${format(row.max)})`
        : `${row.label}: ${row.text}`,
  }))
  const rounds = Math.max(...rows.map((row) => row.rounds))
  const ratios = results.baseline !== undefined
  const smallest = Math.min(...rows.map((row) => row.min))
  const largest = Math.max(...rows.map((row) => row.max))
  const scale = results.scale ?? (largest / smallest > 20 ? 'log' : 'linear')
  const logTicks = decades(smallest, largest)
  const spread =
    rounds > 1
      ? `dot: median of ${rounds} ${results.roundName ?? 'round'}s, line: min..max`
      : 'one value per row'
  const xTitle = ratios
    ? `× ${results.baseline}, same run (${spread})`
    : `${results.unit} (${spread})`

  const y = {
    field: 'label',
    type: 'nominal',
    sort: null,
    title: null,
    axis: { labelLimit: 0, labelFontSize: 12 },
  } as const
  const x = {
    field: 'median',
    type: 'quantitative',
    title: xTitle,
    scale:
      scale === 'log'
        ? { type: 'log', domain: [logTicks[0]!, logTicks.at(-1)!] }
        : { type: 'linear', zero: !ratios, nice: true },
    axis: scale === 'log' ? { grid: true, values: logTicks } : { grid: true, tickCount: 6 },
  } as const
  const layer = [
    ...(ratios
      ? [
          {
            mark: { type: 'rule', color: GREY, strokeDash: [4, 3] },
            encoding: { x: { datum: 1, type: 'quantitative' } },
          } as const,
        ]
      : []),
    {
      transform: [{ filter: 'datum.rounds > 1' }],
      mark: { type: 'rule', strokeWidth: 2, color: BLUE, opacity: 0.55 },
      encoding: { y, x: { field: 'min', type: 'quantitative' }, x2: { field: 'max' } },
    } as const,
    {
      mark: { type: 'point', filled: true, size: 70, opacity: 1 },
      encoding: {
        y,
        x,
        description: { field: 'description' },
        color: {
          field: 'kind',
          type: 'nominal',
          scale: { domain: ['baseline', 'row'], range: [GREY, BLUE] },
          legend: null,
        },
      },
    } as const,
    {
      mark: { type: 'text', align: 'left', dx: 7, fontSize: 11, color: '#333' },
      encoding: { y, x: { field: 'max', type: 'quantitative' }, text: { field: 'text' } },
    } as const,
  ]
  const groups = [...new Set(rows.map((row) => row.group))]
  const common = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: results.title,
      anchor: 'start',
      fontSize: 14,
      ...(results.note ? { subtitle: results.note, subtitleColor: '#555' } : {}),
    },
    data: { values: rows },
    // No per-mark ARIA: the SVG carries a <title> and <desc> instead (see render.ts).
    config: { font: 'sans-serif', view: { stroke: null }, aria: false },
  } as const
  if (groups.length === 1 && groups[0] === '') {
    return { ...common, width: 420, height: { step: 24 }, layer } as TopLevelSpec
  }
  return {
    ...common,
    spacing: 6,
    facet: {
      row: {
        field: 'group',
        type: 'nominal',
        sort: groups,
        header: {
          title: null,
          labelAngle: 0,
          labelOrient: 'top',
          labelAnchor: 'start',
          labelAlign: 'left',
          labelFontSize: 12,
          labelFontWeight: 'bold',
          labelPadding: 2,
        },
      },
    },
    spec: { width: 420, height: { step: 24 }, layer },
    resolve: { scale: { y: 'independent' } },
  } as TopLevelSpec
}

/** Ticks for a log axis: 1, 2 and 5 per decade over at most 3 decades, else powers of ten. */
function decades(smallest: number, largest: number): number[] {
  const low = Math.floor(Math.log10(smallest))
  const high = Math.max(Math.ceil(Math.log10(largest)), low + 1)
  const steps = high - low <= 3 ? [1, 2, 5] : [1]
  const ticks: number[] = []
  for (let power = low; power <= high; power++) {
    for (const step of steps) {
      const tick = Number((step * 10 ** power).toPrecision(1))
      if (power === high && step > 1) break
      ticks.push(tick)
    }
  }
  return ticks
}
