#!/usr/bin/env node
/**
 * bench-chart <results.json>... [--out <chart.svg>]
 *
 * Draws each results JSON as an SVG beside it: `name.chart.json` or `name.json` → `name.svg`.
 * `--out` names the SVG when there is one input.
 */
import { main } from './main.ts'

process.exitCode = await main(process.argv.slice(2))
