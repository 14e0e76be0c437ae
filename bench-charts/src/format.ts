import type { BenchResults } from './results.ts'

const WIDTH = 100

/**
 * A results JSON laid out as the repository's formatter (Biome, width 100) would lay it out:
 * objects one key a line, short arrays on one line, long arrays of numbers filled line by line.
 * A bench script can write `JSON.stringify(results)` and `bench-chart --tidy` makes it lint-clean.
 */
export function formatResults(results: BenchResults): string {
  return `${layout(results, 0, 0)}\n`
}

function layout(value: unknown, indent: number, used: number, tail = 0): string {
  if (Array.isArray(value)) return layoutArray(value, indent, used, tail)
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value).filter(([, item]) => item !== undefined)
    if (entries.length === 0) return '{}'
    const inner = ' '.repeat(indent + 2)
    const lines = entries.map(([key, item], index) => {
      const head = `${inner}${JSON.stringify(key)}: `
      const comma = index < entries.length - 1 ? 1 : 0
      return `${head}${layout(item, indent + 2, head.length, comma)}${comma ? ',' : ''}`
    })
    return `{\n${lines.join('\n')}\n${' '.repeat(indent)}}`
  }
  return JSON.stringify(value)
}

function layoutArray(items: unknown[], indent: number, used: number, tail: number): string {
  if (items.length === 0) return '[]'
  const flat = items.every((item) => item === null || typeof item !== 'object')
  const parts = items.map((item) => JSON.stringify(item))
  const oneLine = `[${parts.join(', ')}]`
  if (flat && used + oneLine.length + tail <= WIDTH) return oneLine
  const inner = ' '.repeat(indent + 2)
  if (items.every((item) => typeof item === 'number')) {
    const lines: string[] = []
    let line = ''
    for (const [index, part] of parts.entries()) {
      const piece = index < parts.length - 1 ? `${part},` : part
      if (line && inner.length + line.length + 1 + piece.length > WIDTH) {
        lines.push(line)
        line = piece
      } else line = line ? `${line} ${piece}` : piece
    }
    lines.push(line)
    return `[\n${lines.map((text) => inner + text).join('\n')}\n${' '.repeat(indent)}]`
  }
  const lines = items.map(
    (item, index) =>
      `${inner}${layout(item, indent + 2, inner.length, index < items.length - 1 ? 1 : 0)}${index < items.length - 1 ? ',' : ''}`,
  )
  return `[\n${lines.join('\n')}\n${' '.repeat(indent)}]`
}
