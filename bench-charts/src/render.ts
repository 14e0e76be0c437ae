import { Error as ERRORS_ONLY, logger, parse, View } from 'vega'
import { compile } from 'vega-lite'
import { type BenchResults, readResults } from './results.ts'
import { chartSpec } from './spec.ts'

/** Renders a results chart to SVG text, headless: no browser and no canvas. */
export async function renderSvg(results: BenchResults): Promise<string> {
  const { spec } = compile(chartSpec(readResults(results)), {
    // Vega-Lite warns about faceted independent scales it then handles as intended.
    logger: logger(ERRORS_ONLY),
  })
  const view = new View(parse(spec), { renderer: 'none' })
  try {
    return `${await view.toSVG()}\n`
  } finally {
    view.finalize()
  }
}
