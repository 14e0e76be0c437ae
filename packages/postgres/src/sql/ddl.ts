import { type Ddl, toDdl } from '@shardflake/core'

/**
 * The statements of a script this package generated, each without its final `;`: split at a `;`
 * that ends a line outside dollar-quoted bodies (`$$`, `$shardflake$`). Only for scripts of our
 * own making, whose statements all end that way. @internal
 */
export function splitStatements(script: string): string[] {
  const out: string[] = []
  let current = ''
  let quote: string | undefined
  for (const line of script.split('\n')) {
    current += `${line}\n`
    for (const match of line.matchAll(/\$[a-z_]*\$/g)) {
      if (quote === undefined) quote = match[0]
      else if (quote === match[0]) quote = undefined
    }
    if (quote === undefined && /;\s*$/.test(line) && !/^\s*--/.test(line)) {
      out.push(current.trim().replace(/;$/, ''))
      current = ''
    }
  }
  if (current.trim()) out.push(current.trim())
  return out
}

/** A generated script as a {@link Ddl}. @internal */
export function asDdl(script: string): Ddl {
  return toDdl(splitStatements(script))
}
