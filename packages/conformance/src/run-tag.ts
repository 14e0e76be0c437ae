import { randomBytes } from 'node:crypto'

let tag: string | undefined

/**
 * A tag unique to this test process, `${pid}_${random}` (lowercase, digits and `_`), for the
 * names of databases, schemas and keys a run creates, so that two runs on one server never meet.
 * The same value for the life of the process; pass `fresh: true` for a new one.
 */
export function runTag(fresh = false): string {
  if (fresh) return `${process.pid}_${randomBytes(3).toString('hex')}`
  tag ??= `${process.pid}_${randomBytes(3).toString('hex')}`
  return tag
}
