/** The command line of `bench-chart` (see cli.ts). */
import { readFile, writeFile } from 'node:fs/promises'
import { formatResults } from './format.ts'
import { renderSvg } from './render.ts'
import { readResults } from './results.ts'

const usage = 'usage: bench-chart <results.json>... [--out <chart.svg>] [--tidy]'

export function svgPathFor(input: string): string {
  return `${input.replace(/(\.chart)?\.json$/, '')}.svg`
}

export async function main(args: readonly string[]): Promise<number> {
  const inputs: string[] = []
  let out: string | undefined
  let tidy = false
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '--out') out = args[++i]
    else if (arg === '--tidy') tidy = true
    else if (arg === '--help' || arg === '-h') {
      console.log(usage)
      return 0
    } else inputs.push(arg)
  }
  if (inputs.length === 0 || (out !== undefined && inputs.length !== 1) || out === '') {
    console.error(usage)
    return 2
  }
  for (const input of inputs) {
    const text = await readFile(input, 'utf8')
    const results = readResults(JSON.parse(text), input)
    if (tidy && formatResults(results) !== text) await writeFile(input, formatResults(results))
    const target = out ?? svgPathFor(input)
    await writeFile(target, await renderSvg(results))
    console.log(`${input} → ${target}`)
  }
  return 0
}
