import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  abortShardHomesMove,
  ConfigurationError,
  DirectoryChangedError,
  defineSharding,
  deleteMovedRows,
  InProcessSource,
  InvalidArgumentError,
  instagram,
  type MovedTable,
  type MoveShardHomesOptions,
  moveShardHomes,
  type RowRange,
  type RowStore,
  RowsMismatchError,
  type StoredRow,
} from '../src'
import { MemoryDirectory } from './memory-directory'

/**
 * The orchestration of `moveShardHomes` over servers in memory (the dialects' stores run against
 * real servers in the conformance suite): what is copied, reconciled, verified and switched, in
 * which order, and where a stopped move stands.
 */
const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const shardOf = (id: bigint) => sharding.shardOfId(id)

/** One server's tables in memory: id → content. */
class MemoryStore implements RowStore {
  readonly tables = new Map<string, Map<bigint, string>>()
  writes: { table: string; mode: string; ids: bigint[] }[] = []
  constructor(names: readonly string[]) {
    for (const name of names) this.tables.set(name, new Map())
  }
  private table(table: MovedTable) {
    const rows = this.tables.get(table.name)
    if (!rows) throw new ConfigurationError(`Table ${table.name} does not exist.`)
    return rows
  }
  private pick(table: MovedTable, range: RowRange): StoredRow[] {
    const rows = [...this.table(table)]
      .filter(([id]) =>
        range.shards.includes(Number((id >> BigInt(range.shift)) & BigInt(range.mask))),
      )
      .filter(([id]) => range.after === undefined || id > range.after)
      .filter(([id]) => range.upTo === undefined || id <= range.upTo)
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
      .map(([id, content]) => ({ id, content }))
    return range.limit === undefined ? rows : rows.slice(0, range.limit)
  }
  async checkTable(table: MovedTable) {
    this.table(table)
  }
  async readRows(table: MovedTable, range: RowRange) {
    return this.pick(table, range)
  }
  async writeRows(table: MovedTable, rows: readonly StoredRow[], mode: 'missing' | 'replace') {
    const stored = this.table(table)
    this.writes.push({ table: table.name, mode, ids: rows.map((row) => row.id) })
    for (const row of rows) {
      if (mode === 'replace' || !stored.has(row.id)) stored.set(row.id, row.content)
    }
  }
  async deleteRows(table: MovedTable, ids: readonly bigint[]) {
    for (const id of ids) this.table(table).delete(id)
  }
  async deleteRange(table: MovedTable, range: RowRange) {
    const rows = this.pick(table, range)
    for (const row of rows) this.table(table).delete(row.id)
    return rows.length
  }
}

function setup(rowsPerShard = 3) {
  const directory = new MemoryDirectory(
    sharding,
    [
      { from: 0, to: 31, server: 'a', state: 'serving' },
      { from: 32, to: 63, server: 'c', state: 'serving' },
    ],
    50,
  )
  const a = new MemoryStore(['posts', 'comments'])
  const c = new MemoryStore(['posts', 'comments'])
  const source = new InProcessSource({ sharding, shards: 'all' })
  for (let shard = 0; shard < 64; shard++) {
    for (let index = 0; index < rowsPerShard; index++) {
      const home = shard < 32 ? a : c
      const id = source.nextId(shard)
      home.tables.get('posts')!.set(id, `post ${id}`)
      home.tables.get('comments')!.set(source.nextId(shard), `comment on ${id}`)
    }
  }
  source.close()
  const options: MoveShardHomesOptions = {
    sharding,
    directory,
    servers: { a, c },
    shards: '0-15',
    to: 'c',
    tables: ['posts', 'comments'],
    batchSize: 4,
  }
  return { directory, a, c, options }
}

const moving = (store: MemoryStore, table = 'posts') =>
  new Map([...store.tables.get(table)!].filter(([id]) => shardOf(id) < 16))

describe('moveShardHomes', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('copies, switches, reconciles what changed during the copy, verifies and flips', async () => {
    const { directory, a, c, options } = setup()
    const phases: string[] = []
    const states: string[] = []
    const before = moving(a)
    // In different pages: each must be found by its page's checksum.
    const [changed, deleted] = [[...before.keys()][0], [...before.keys()][9]]
    let edited = false
    const result = await moveShardHomes({
      ...options,
      onProgress: ({ phase, rows }) => {
        if (phases.at(-1) !== phase) {
          phases.push(phase)
          states.push(`${directory.entries[0]!.server} ${directory.entries[0]!.state}`)
        }
        // The application writes on a during the copy: one update, one delete, one insert.
        if (phase === 'copying' && (rows ?? 0) >= 12 && !edited) {
          edited = true
          a.tables.get('posts')!.set(changed!, 'changed during the copy')
          a.tables.get('posts')!.delete(deleted!)
        }
      },
    })
    expect(phases).toEqual([
      'copying',
      'switching',
      'reconciling',
      'verifying',
      'arriving',
      'serving',
    ])
    expect(states).toEqual([
      'a serving',
      'a switching',
      'a switching',
      'a switching',
      'c arriving',
      'c serving',
    ])
    expect(directory.entries).toEqual([
      { from: 0, to: 15, server: 'c', state: 'serving' },
      { from: 16, to: 31, server: 'a', state: 'serving' },
      { from: 32, to: 63, server: 'c', state: 'serving' },
    ])
    expect(moving(c)).toEqual(moving(a))
    expect(moving(c, 'comments')).toEqual(moving(a, 'comments'))
    expect(moving(c).get(changed!)).toBe('changed during the copy')
    expect(moving(c).has(deleted!)).toBe(false)
    expect(result.tables[0]).toMatchObject({
      table: 'posts',
      copied: 48,
      repaired: 1,
      removed: 1,
      rows: 47,
    })
    expect(result.tables[1]).toMatchObject({
      table: 'comments',
      copied: 48,
      repaired: 0,
      removed: 0,
      rows: 48,
    })
    expect(result).toMatchObject({ from: 'a', to: 'c', resumedFrom: 'start', oldCopiesDeleted: 0 })
    // Copies are inserted only where missing; repairs overwrite.
    expect(new Set(c.writes.map((write) => write.mode))).toEqual(new Set(['missing', 'replace']))
    expect(
      c.writes.filter((write) => write.mode === 'replace').flatMap((write) => write.ids),
    ).toEqual([changed])
    // The old copies stay, and the other shards were never touched.
    expect(moving(a).size).toBe(47)
    expect(
      [...c.tables.get('posts')!.keys()].filter((id) => shardOf(id) >= 16 && shardOf(id) < 32),
    ).toEqual([])
  })

  it('waits maxStaleMs after switching before it reconciles, and after arriving before it serves', async () => {
    const { directory, options } = setup()
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    const flush = async () => {
      for (let turn = 0; turn < 500; turn++) await Promise.resolve()
    }
    const phases: string[] = []
    const move = moveShardHomes({ ...options, onProgress: ({ phase }) => void phases.push(phase) })
    await flush()
    expect(phases.at(-1)).toBe('switching')
    await vi.advanceTimersByTimeAsync(49)
    await flush()
    expect(phases.at(-1)).toBe('switching')
    await vi.advanceTimersByTimeAsync(1)
    await flush()
    expect(phases.at(-1)).toBe('arriving')
    expect(directory.entries[0]).toMatchObject({ server: 'c', state: 'arriving' })
    await vi.advanceTimersByTimeAsync(49)
    await flush()
    expect(directory.entries[0]).toMatchObject({ server: 'c', state: 'arriving' })
    await vi.advanceTimersByTimeAsync(1)
    await move
    expect(directory.entries[0]).toMatchObject({ server: 'c', state: 'serving' })
  })

  it('deletes the old copies when asked, children first, and deleteMovedRows does it later', async () => {
    const { a, options } = setup()
    const result = await moveShardHomes({ ...options, deleteOldCopies: true })
    expect(result.oldCopiesDeleted).toBe(96)
    expect(moving(a).size).toBe(0)
    expect(moving(a, 'comments').size).toBe(0)
    expect(a.tables.get('posts')!.size).toBe(48)

    const other = setup()
    // Before the move, the rows on a are not old copies.
    await expect(deleteMovedRows({ ...other.options, from: 'a' })).rejects.toThrow(
      /do not all serve on server "c"/,
    )
    await moveShardHomes(other.options)
    expect(await deleteMovedRows({ ...other.options, from: 'a' })).toBe(96)
    expect(moving(other.a).size).toBe(0)
  })

  it('a row edited on the target after reconciling fails the verification: back to serving on a', async () => {
    const { directory, c, options } = setup()
    const attempt = moveShardHomes({
      ...options,
      onProgress: ({ phase, table }) => {
        if (phase === 'reconciling' && table === 'comments') {
          const [id] = [...moving(c).keys()]
          c.tables.get('posts')!.set(id!, 'edited behind the mover')
        }
      },
    })
    await expect(attempt).rejects.toBeInstanceOf(RowsMismatchError)
    await expect(attempt).rejects.toThrow(/Table posts differs .* 48 rows .* 48 \(checksum/)
    expect(directory.entries[0]).toEqual({ from: 0, to: 31, server: 'a', state: 'serving' })
    // A row only on the target is caught too.
    const extra = setup()
    const attempt2 = moveShardHomes({
      ...extra.options,
      onProgress: ({ phase, table }) => {
        if (phase === 'reconciling' && table === 'comments') {
          extra.c.tables.get('posts')!.set(1n << 10n, 'stray')
        }
      },
    })
    await expect(attempt2).rejects.toThrow(/48 rows .* on the source, 49 /)
  })

  it('resumes from where the directory says the move stands', async () => {
    const switching = setup()
    await switching.directory.set(0, { state: 'switching' })
    const phases: string[] = []
    const resumed = await moveShardHomes({
      ...switching.options,
      shards: '0-31',
      onProgress: ({ phase }) => {
        if (phases.at(-1) !== phase) phases.push(phase)
      },
    })
    expect(resumed.resumedFrom).toBe('switching')
    expect(phases[0]).toBe('switching')
    expect(phases).not.toContain('copying')
    expect(resumed.tables[0]!.repaired).toBe(96)
    expect(switching.directory.entries).toEqual([
      { from: 0, to: 63, server: 'c', state: 'serving' },
    ])

    const arriving = setup()
    await arriving.directory.set(0, { server: 'c', state: 'arriving' })
    const done = await moveShardHomes({ ...arriving.options, shards: '0-31' })
    expect(done.resumedFrom).toBe('arriving')
    expect(done.from).toBeUndefined()
    expect(arriving.directory.entries).toEqual([{ from: 0, to: 63, server: 'c', state: 'serving' }])
    // Nothing was copied: the process that set `arriving` had verified the rows.
    expect(arriving.c.writes).toEqual([])
    // Finished: only with from, and then only the old copies are left to delete.
    await expect(moveShardHomes({ ...arriving.options, shards: '0-31' })).rejects.toThrow(
      /already serve on server "c"/,
    )
    const finished = await moveShardHomes({ ...arriving.options, shards: '0-31', from: 'a' })
    expect(finished.resumedFrom).toBe('done')
  })

  it('abort: from switching at once, from arriving back through switching; copies on the target deleted', async () => {
    const { directory, a, c, options } = setup()
    for (const [id, content] of moving(a)) c.tables.get('posts')!.set(id, content)
    await directory.set(0, { state: 'switching' })
    const back = { ...options, shards: '0-31', from: 'a' }
    expect(await abortShardHomesMove(back)).toBe(48)
    expect(directory.entries[0]).toEqual({ from: 0, to: 31, server: 'a', state: 'serving' })
    expect([...c.tables.get('posts')!.keys()].filter((id) => shardOf(id) < 32)).toEqual([])

    await directory.set(0, { server: 'c', state: 'arriving' })
    const states: string[] = []
    await abortShardHomesMove({
      ...back,
      onProgress: ({ phase }) => {
        states.push(`${phase}: ${directory.entries[0]!.server} ${directory.entries[0]!.state}`)
      },
    })
    expect(states.slice(0, 2)).toEqual(['switching: a switching', 'serving: a serving'])
    await directory.set(0, { server: 'c', state: 'serving' })
    await expect(abortShardHomesMove(back)).rejects.toThrow(/the move finished/)
  })

  it('a compare-and-set lost to another process is tried again on what it changed', async () => {
    const { directory, options } = setup()
    let raced = false
    const original = directory.compareAndSet.bind(directory)
    directory.compareAndSet = async (expected, entries) => {
      if (!raced) {
        raced = true
        // Another mover changed another range first.
        await directory.set(32, { state: 'serving', server: 'c' })
      }
      return original(expected, entries)
    }
    await moveShardHomes(options)
    expect(directory.entries[0]).toEqual({ from: 0, to: 15, server: 'c', state: 'serving' })
    // A change to the moving shards themselves is not overridden.
    const other = setup()
    const swap = other.directory.compareAndSet.bind(other.directory)
    let once = false
    other.directory.compareAndSet = async (expected, entries) => {
      if (!once) {
        once = true
        await other.directory.set(0, { state: 'arriving', server: 'b' })
        throw new DirectoryChangedError('lost')
      }
      return swap(expected, entries)
    }
    await expect(moveShardHomes(other.options)).rejects.toThrow(/another process changed it/)
  })

  it('refuses bad input before reading or writing anything', async () => {
    const { directory, a, c, options } = setup()
    const cases: [Partial<MoveShardHomesOptions> & Record<string, unknown>, RegExp][] = [
      [{ to: 'z' }, /to must name one of the servers/],
      [{ from: 'c' }, /from and to are the same server/],
      [{ shards: '0-40' }, /not all on one server/],
      [{ tables: [] }, /tables must list/],
      [{ tables: ['posts', 'posts'] }, /twice/],
      [{ tables: ['a.b.c'] }, /table/],
      [{ tables: [{ name: 'posts', idColumn: 'Id' }] }, /column/],
      [{ batchSize: 0 }, /batchSize/],
      [{ batchSize: 1.5 }, /batchSize/],
      [{ deleteOldCopies: 'yes' as never }, /deleteOldCopies/],
      [{ moveIds: 3 as never }, /moveIds/],
      [{ servers: { a, c: {} as RowStore } }, /row store/],
      [{ directory: {} as never }, /shard directory/],
      [{ onProgress: 1 as never }, /onProgress/],
      [{ tables: ['missing'] }, /missing does not exist/],
    ]
    for (const [change, message] of cases) {
      await expect(
        moveShardHomes({ ...options, ...change }),
        JSON.stringify(change),
      ).rejects.toThrow(message)
    }
    expect(directory.version).toBe(1n)
    expect(c.writes).toEqual([])
    await expect(moveShardHomes({ ...options, batchSize: 0 })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    )
  })
})
