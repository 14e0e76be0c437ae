#!/usr/bin/env node
/**
 * bench-chart <results.json>... [--out <chart.svg>] [--tidy]
 *
 * Draws each results JSON as an SVG beside it: `name.chart.json` or `name.json` → `name.svg`.
 * `--out` names the SVG when there is one input. `--tidy` rewrites each JSON in the layout the
 * repository's formatter gives it, so what a bench script wrote with `JSON.stringify` lints clean.
 */
import { main } from './main.ts'

process.exitCode = await main(process.argv.slice(2))
