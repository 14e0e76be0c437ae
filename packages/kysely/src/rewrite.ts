/**
 * Reading and rewriting the INSERTs of a Kysely query: every row of every insert into a declared
 * table gets a value in its key column. Nodes are built as the plain frozen objects Kysely uses.
 */
import { InvalidArgumentError } from '@shardflake/core'
import type {
  AliasNode,
  ColumnNode,
  CommonTableExpressionNode,
  InsertQueryNode,
  MergeQueryNode,
  OperationNode,
  RootOperationNode,
  TableNode,
  ValueNode,
  ValuesItemNode,
  ValuesNode,
  WhenNode,
  WithNode,
} from 'kysely'
import { checkUpdate, newKey, upsertKey } from './key-changes'
import { PendingId } from './pending-id'
import { type Placement, type RowValues, SQL_EXPRESSION } from './placement'

/** What a rewrite needs from the plugin: the placement of a table, and IDs for planned rows. */
export interface InsertFiller {
  /** The placement of the table a node names, or `undefined` for a table that is not declared. */
  placementOf(into: OperationNode | undefined): Placement | undefined
  /** One key value per shard in `shards` (IDs, or pending IDs), asking the source once per shard. */
  fill(shards: readonly number[]): readonly unknown[]
  /**
   * Told the logical shard of every row of each INSERT into a declared table that comes out of a
   * rewrite (the node returned, and the shard of each of its rows' keys in order) when every
   * row's shard is known: a router then places the rows without reading their IDs again.
   * Not set when nothing routes this plugin's queries.
   */
  placed?: ((node: InsertQueryNode, shards: readonly number[]) => void) | undefined
}

type QueryWithCtes = RootOperationNode & { readonly with?: WithNode }

/**
 * The query with the key column of every new row of a declared table filled: the query itself if
 * it is an INSERT (or MERGE ... INSERT), and every INSERT in its `WITH` clauses. Other queries
 * come back as they are.
 */
export function rewriteQuery(node: RootOperationNode, filler: InsertFiller): RootOperationNode {
  const withNode = (node as QueryWithCtes).with
  const ctes = withNode ? rewriteWith(withNode, filler) : withNode
  const base = ctes === withNode ? node : freeze({ ...node, with: ctes })
  if (base.kind === 'InsertQueryNode') {
    const placement = filler.placementOf(base.into)
    return placement ? rewriteInsert(base, placement, filler) : base
  }
  if (base.kind === 'MergeQueryNode') return rewriteMerge(base, filler)
  if (base.kind === 'UpdateQueryNode') {
    const placement = filler.placementOf(base.table)
    if (placement) checkUpdate(base, placement)
  }
  return base
}

function rewriteWith(node: WithNode, filler: InsertFiller): WithNode {
  let changed = false
  const expressions = node.expressions.map((cte): CommonTableExpressionNode => {
    const expression = isQuery(cte.expression)
      ? rewriteQuery(cte.expression, filler)
      : cte.expression
    if (expression === cte.expression) return cte
    changed = true
    return freeze({ ...cte, expression })
  })
  return changed ? freeze({ ...node, expressions }) : node
}

function rewriteMerge(node: MergeQueryNode, filler: InsertFiller): MergeQueryNode {
  const placement = filler.placementOf(node.into)
  if (!placement || !node.whens) return node
  const whens = node.whens.map((when): WhenNode => {
    if (when.result?.kind !== 'InsertQueryNode') return when
    const result = rewriteInsert(when.result as InsertQueryNode, placement, filler)
    return result === when.result ? when : freeze({ ...when, result })
  })
  return freeze({ ...node, whens })
}

/**
 * One INSERT into a declared table: every row is planned first (its shard by the rule, or the ID
 * it was given checked against the rule), so a bad row leaves nothing allocated; then the rows
 * without an ID get one, in a new node.
 * @throws MissingShardKeyError for a row without its key or parent (or `defaultValues()` under
 *   a rule that needs one)
 * @throws InvalidArgumentError for INSERT ... SELECT without the key column
 */
export function rewriteInsert(
  node: InsertQueryNode,
  placement: Placement,
  filler: InsertFiller,
): InsertQueryNode {
  const { column, name } = placement.spec
  const { shardColumn } = placement
  const columns = node.columns ?? []
  const names = columns.map((c) => c.column.name)
  const keyIndex = names.indexOf(column)
  const shardIndex = shardColumn === undefined ? -1 : names.indexOf(shardColumn)
  const values = node.values
  if (!values) {
    if (!node.defaultValues) return node
    // `default values`: one row with no values, which only a fixed shard can place.
    const shard = placement.shardOf(Object.create(null))
    const [id] = filler.fill([shard])
    const row = shardColumn === undefined ? [id] : [id, shard]
    return placed(filler, [shard], {
      ...node,
      defaultValues: false,
      columns: freeze([
        columnNode(column),
        ...(shardColumn === undefined ? [] : [columnNode(shardColumn)]),
      ]),
      values: valuesNode([freeze({ kind: 'PrimitiveValueListNode', values: freeze(row) })]),
    })
  }
  if (values.kind !== 'ValuesNode') {
    if (keyIndex >= 0 && (shardColumn === undefined || shardIndex >= 0)) return node // INSERT ... SELECT with the key column: the caller's IDs
    const missing = keyIndex < 0 ? column : shardColumn
    throw new InvalidArgumentError(
      `INSERT INTO ${name} ... SELECT: its rows come from the query, so there are no rows to give IDs to before it runs. Select the '${missing}' column too (IDs you made with the source, e.g. from ids.assign(), and the shard column holding each ID's shard), or insert the rows with .values().`,
    )
  }
  const rows = (values as ValuesNode).values
  // A rule naming a column reads that column only: one small row object serves every row.
  const { field } = placement
  const fieldIndex = field === undefined ? -1 : names.indexOf(field)
  const wholeRows = field === undefined && !('shard' in placement.spec.rule)
  const shared: RowValues = Object.create(null)
  const rowOf = (item: ValuesItemNode): RowValues => {
    if (wholeRows) return readRow(item, names)
    if (field !== undefined) shared[field] = fieldIndex < 0 ? undefined : valueAt(item, fieldIndex)
    return shared
  }
  // An upsert whose update sets the rule's column moves the stored row it lands on: checked
  // (ShardKeyChangedError) for rows that give their ID, the row an upsert by ID lands on.
  const upsert = upsertKey(node, placement)
  const shardUpdate = shardColumn === undefined ? undefined : upsertShardColumn(node, shardColumn)
  const missing: number[] = []
  const shards: number[] = []
  // The shard column value each row lacks, by row: the shard of its ID (known before the ID).
  const shardValues = new Map<number, number>()
  // The shard of every row's key, for a router (unset once a row's is not known: SQL).
  let rowShards: number[] | undefined = filler.placed ? new Array<number>(rows.length) : undefined
  for (let index = 0; index < rows.length; index++) {
    const item = rows[index]!
    const id = keyIndex < 0 ? undefined : valueAt(item, keyIndex)
    let shard: number | undefined
    if (id === undefined || id === null) {
      shard = placement.shardOf(rowOf(item))
      shards.push(shard)
      missing.push(index)
    } else if (id instanceof PendingId) {
      shard = id.shard
    } else if (id !== SQL_EXPRESSION) {
      const row = rowOf(item)
      if (upsert !== undefined && upsert !== 'sql') {
        placement.checkMove(id, upsert === 'row' ? row[field!] : upsert.value, 'an upsert')
      }
      const checked = placement.checkId(row, id)
      shard = placement.sharding?.layout.shardOf(checked)
      if (shardUpdate !== undefined && shardUpdate !== 'row' && shardUpdate !== 'sql') {
        placement.checkShardColumnMove(checked, shardUpdate.value, 'an upsert')
      }
    }
    if (rowShards) {
      if (shard === undefined) rowShards = undefined
      else rowShards[index] = shard
    }
    if (shardColumn !== undefined && shard === undefined && shardIndex < 0) {
      throw new InvalidArgumentError(
        `A new row of ${name} gives its '${column}' as SQL, so the shard of its ID is not known before the INSERT runs: give the '${shardColumn}' column as well, or pass the ID's value.`,
      )
    }
    if (shardColumn !== undefined && shard !== undefined) {
      const given = shardIndex < 0 ? undefined : valueAt(item, shardIndex)
      if (placement.checkShardColumn(given, shard)) shardValues.set(index, shard)
    }
  }
  if (missing.length === 0 && shardValues.size === 0) {
    if (rowShards) filler.placed!(node, rowShards)
    return node
  }
  const ids = missing.length === 0 ? [] : filler.fill(shards)
  const filled = new Array<unknown>(rows.length)
  missing.forEach((index, i) => {
    filled[index] = ids[i]
  })
  const addKey = keyIndex < 0 && missing.length > 0
  const addShard = shardIndex < 0 && shardValues.size > 0
  return placed(filler, rowShards, {
    ...node,
    columns:
      addKey || addShard
        ? freeze([
            ...columns,
            ...(addKey ? [columnNode(column)] : []),
            ...(addShard ? [columnNode(shardColumn!)] : []),
          ])
        : node.columns,
    values: valuesNode(
      rows.map((item, index) => {
        let row = item
        if (addKey || index in filled) {
          row = withValue(row, addKey ? -1 : keyIndex, index in filled ? filled[index] : undefined)
        }
        if (addShard || shardValues.has(index)) {
          row = withValue(row, addShard ? -1 : shardIndex, shardValues.get(index))
        }
        return row
      }),
    ),
  })
}

/** The new INSERT, frozen, its rows' shards told to `filler.placed` when they are all known. */
function placed(
  filler: InsertFiller,
  shards: readonly number[] | undefined,
  node: InsertQueryNode,
): InsertQueryNode {
  const result = freeze(node)
  if (shards && filler.placed) filler.placed(result, shards)
  return result
}

/** What the conflict clause of an INSERT sets the shard column to, if it sets it. */
function upsertShardColumn(node: InsertQueryNode, shardColumn: string) {
  return newKey(node.onConflict?.updates ?? node.onDuplicateKey?.updates, shardColumn)
}

/** The values of one row by column name; a default is `undefined`, SQL is {@link SQL_EXPRESSION}. */
export function readRow(item: ValuesItemNode, names: readonly string[]): RowValues {
  const row: RowValues = Object.create(null)
  for (let i = 0; i < names.length; i++) row[names[i]!] = valueAt(item, i)
  return row
}

/** The value of a row's column `index`; a default is `undefined`, SQL is {@link SQL_EXPRESSION}. */
function valueAt(item: ValuesItemNode, index: number): unknown {
  return item.kind === 'PrimitiveValueListNode' ? item.values[index] : readValue(item.values[index])
}

function readValue(node: OperationNode | undefined): unknown {
  if (node === undefined || node.kind === 'DefaultInsertValueNode') return undefined
  if (node.kind === 'ValueNode') return (node as ValueNode).value
  return SQL_EXPRESSION
}

/**
 * The row with a column set: appended when the query had no such column (`index` -1), else
 * replaced. `undefined` appends a DEFAULT (a row that keeps its own value of a column the
 * query adds for the other rows: none does, each row of the batch gets one).
 */
function withValue(item: ValuesItemNode, index: number, value: unknown): ValuesItemNode {
  if (item.kind === 'PrimitiveValueListNode') {
    const values = index < 0 ? [...item.values, value] : item.values.with(index, value)
    return freeze({ kind: 'PrimitiveValueListNode', values: freeze(values) })
  }
  const node: ValueNode = freeze({ kind: 'ValueNode', value })
  const values = index < 0 ? [...item.values, node] : item.values.with(index, node)
  return freeze({ kind: 'ValueListNode', values: freeze(values) })
}

/** The table an INSERT or MERGE names: `{ schema, table }`, through an alias. */
export function tableOf(
  node: OperationNode | undefined,
): { readonly schema: string | undefined; readonly table: string } | undefined {
  if (node?.kind === 'AliasNode') return tableOf((node as AliasNode).node)
  if (node?.kind !== 'TableNode') return undefined
  const { schema, identifier } = (node as TableNode).table
  return { schema: schema?.name, table: identifier.name }
}

const QUERY_KINDS = new Set([
  'SelectQueryNode',
  'InsertQueryNode',
  'UpdateQueryNode',
  'DeleteQueryNode',
  'MergeQueryNode',
])

function isQuery(node: OperationNode): node is RootOperationNode {
  return QUERY_KINDS.has(node.kind)
}

function columnNode(name: string): ColumnNode {
  return freeze({ kind: 'ColumnNode', column: freeze({ kind: 'IdentifierNode', name }) })
}

function valuesNode(values: readonly ValuesItemNode[]): ValuesNode {
  return freeze({ kind: 'ValuesNode', values: freeze(values) })
}

function freeze<T>(value: T): T {
  return Object.freeze(value)
}
