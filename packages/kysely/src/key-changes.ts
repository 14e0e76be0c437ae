/**
 * Writes that set the rule's column of stored rows: an UPDATE that names its rows by key, and the
 * update of an upsert. The plugin sees the new key there, and the ID of the row it lands on when
 * the query names it; the ID must stay on the shard the new key gives.
 */
import type {
  AndNode,
  BinaryOperationNode,
  ColumnNode,
  ColumnUpdateNode,
  FunctionNode,
  InsertQueryNode,
  OperationNode,
  OperatorNode,
  OrNode,
  ParensNode,
  PrimitiveValueListNode,
  ReferenceNode,
  UpdateQueryNode,
  ValueListNode,
  ValueNode,
} from 'kysely'
import type { Placement } from './placement'

/**
 * What a write sets the rule's column to: a value, the inserted row's own value (`excluded.col`,
 * MySQL's `values(col)`), or SQL whose value is unknown before the query runs.
 */
export type NewKey = { readonly value: unknown } | 'row' | 'sql'

/** What the conflict clause of an INSERT sets the rule's column to, if it sets it. */
export function upsertKey(node: InsertQueryNode, placement: Placement): NewKey | undefined {
  return newKey(node.onConflict?.updates ?? node.onDuplicateKey?.updates, placement.field)
}

/**
 * Refuses an UPDATE of a declared table that sets the rule's column to a value on another shard
 * than the ID of a row its WHERE names by key (`id = x`, `id in (...)`, under AND / OR).
 * @throws ShardKeyChangedError
 */
export function checkUpdate(node: UpdateQueryNode, placement: Placement): void {
  if (!node.where) return
  const shardColumn = newKey(node.updates, placement.shardColumn)
  if (shardColumn !== undefined && shardColumn !== 'row' && shardColumn !== 'sql') {
    for (const id of namedIds(node.where.where, placement.spec.column)) {
      placement.checkShardColumnMove(id, shardColumn.value, 'an update')
    }
  }
  const key = newKey(node.updates, placement.field)
  if (key === undefined || key === 'row' || key === 'sql') return
  for (const id of namedIds(node.where.where, placement.spec.column)) {
    placement.checkMove(id, key.value, 'an update')
  }
}

/** What `updates` set `field` to, if they set it. */
export function newKey(
  updates: readonly ColumnUpdateNode[] | undefined,
  field: string | undefined,
): NewKey | undefined {
  if (field === undefined || !updates) return undefined
  const update = updates.find((each) => columnName(each.column) === field)
  if (!update) return undefined
  const { value } = update
  if (value.kind === 'ValueNode') return { value: (value as ValueNode).value }
  if (isOwnValue(value, field)) return 'row'
  return 'sql'
}

/** `excluded.<field>` (PostgreSQL) or `values(<field>)` (MySQL): the inserted row's value. */
function isOwnValue(node: OperationNode, field: string): boolean {
  if (node.kind === 'ReferenceNode') {
    const { table } = node as ReferenceNode
    return table?.table.identifier.name === 'excluded' && columnName(node) === field
  }
  if (node.kind === 'FunctionNode') {
    const { func, arguments: args } = node as FunctionNode
    return func.toLowerCase() === 'values' && args.length === 1 && columnName(args[0]!) === field
  }
  return false
}

function columnName(node: OperationNode): string | undefined {
  if (node.kind === 'ColumnNode') return (node as ColumnNode).column.name
  if (node.kind === 'ReferenceNode') {
    const { column } = node as ReferenceNode
    return column.kind === 'ColumnNode' ? column.column.name : undefined
  }
  return undefined
}

/** The values a condition compares the key column with by `=` or `in`, through AND, OR and parentheses. */
export function namedIds(node: OperationNode, column: string): unknown[] {
  switch (node.kind) {
    case 'AndNode':
    case 'OrNode': {
      const { left, right } = node as AndNode | OrNode
      return [...namedIds(left, column), ...namedIds(right, column)]
    }
    case 'ParensNode':
      return namedIds((node as ParensNode).node, column)
    case 'BinaryOperationNode': {
      const { leftOperand, operator, rightOperand } = node as BinaryOperationNode
      if (columnName(leftOperand) !== column) return []
      const op = (operator as OperatorNode).operator
      if (op === '=' && rightOperand.kind === 'ValueNode') {
        return [(rightOperand as ValueNode).value]
      }
      if (op === 'in' && rightOperand.kind === 'PrimitiveValueListNode') {
        return [...(rightOperand as PrimitiveValueListNode).values]
      }
      if (op === 'in' && rightOperand.kind === 'ValueListNode') {
        return (rightOperand as ValueListNode).values
          .filter((value) => value.kind === 'ValueNode')
          .map((value) => (value as ValueNode).value)
      }
      return []
    }
    default:
      return []
  }
}
