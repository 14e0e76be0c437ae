import { Error as ERRORS_ONLY, logger, parse, View } from 'vega'
import { compile } from 'vega-lite'
import { type BenchResults, readResults } from './results.ts'
import { chartSpec } from './spec.ts'
import { summarize } from './summary.ts'

const escapeXml = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/**
 * Renders a results chart to SVG text, headless: no browser and no canvas. The SVG opens with a
 * `<title>` and a `<desc>` that lists every row's figure, for screen readers and for diffs.
 */
export async function renderSvg(input: BenchResults): Promise<string> {
  const results = readResults(input)
  const { spec } = compile(chartSpec(results), {
    // Vega-Lite warns about faceted independent scales it then handles as intended.
    logger: logger(ERRORS_ONLY),
  })
  const view = new View(parse(spec), { renderer: 'none' })
  try {
    const svg = await view.toSVG()
    const desc = summarize(results)
      .map((row) => `${row.group ? `${row.group}, ` : ''}${row.label}: ${row.text}`)
      .join('; ')
    const head = `<title>${escapeXml(results.title)}</title><desc>${escapeXml(desc)}</desc>`
    // Vega still gives its frames ARIA roles that linters reject on <g>; the <title> replaces them.
    const plain = svg.replace(/ role="[^"]*"/g, '')
    return `${plain.replace(/^<svg[^>]*>/, (open) => open + head)}\n`
  } finally {
    view.finalize()
  }
}
