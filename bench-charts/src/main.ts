/** The command line of `bench-chart` (see cli.ts). */
import { readFile, writeFile } from 'node:fs/promises'
import { renderSvg } from './render.ts'
import { readResults } from './results.ts'

const usage = 'usage: bench-chart <results.json>... [--out <chart.svg>]'

export function svgPathFor(input: string): string {
  return `${input.replace(/(\.chart)?\.json$/, '')}.svg`
}

export async function main(args: readonly string[]): Promise<number> {
  const inputs: string[] = []
  let out: string | undefined
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '--out') out = args[++i]
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
    const results = readResults(JSON.parse(await readFile(input, 'utf8')), input)
    const target = out ?? svgPathFor(input)
    await writeFile(target, await renderSvg(results))
    console.log(`${input} → ${target}`)
  }
  return 0
}
