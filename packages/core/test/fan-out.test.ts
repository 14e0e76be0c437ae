import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import {
  CancelledError,
  ConfigurationError,
  defineSharding,
  FanOutError,
  InvalidArgumentError,
  instagram,
  ShardHomes,
  ShardMap,
  ShardOutOfRangeError,
  SourceUnavailableError,
} from '../src'
import { sleep } from './memory-directory'

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const map = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])
const start = Date.UTC(2026, 0, 1)

/** A server's table: the IDs of its rows. */
type Table = bigint[]
interface Row {
  id: bigint
  server: string
}

/** The query a fan-out runs, on a table in memory: its rows of `shards`, in order, at most `limit`. */
function query(order: 'asc' | 'desc', limit?: number) {
  return async (table: Table, server: string, shards: readonly number[]): Promise<Row[]> => {
    const rows = table
      .filter((id) => shards.includes(instagram.shardOf(id)))
      .sort((x, y) => (order === 'desc' ? Number(y - x) : Number(x - y)))
      .map((id) => ({ id, server }))
    return limit === undefined ? rows : rows.slice(0, limit)
  }
}

/** Three servers' tables, each row on the server the map gives for its shard. */
function tables(ids: readonly bigint[]): Record<string, Table> {
  const result: Record<string, Table> = { a: [], b: [], c: [] }
  for (const id of ids) result[map.targetForId(id)]!.push(id)
  return result
}

const id = (ms: number, shard: number, sequence = 0) =>
  instagram.compose({ timestamp: start + ms, shard, sequence })

const opened: ShardHomes<Table>[] = []
async function open(servers: Record<string, Table>): Promise<ShardHomes<Table>> {
  const homes = await ShardHomes.open({ sharding, servers, directory: map })
  opened.push(homes)
  return homes
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((homes) => homes.close()))
})

describe('fanOut', () => {
  it('merges the per-server results by ID, newest first, up to the limit', async () => {
    const ids = [id(1, 0), id(5, 30), id(3, 50), id(9, 1), id(7, 63), id(2, 21), id(8, 42)]
    const homes = await open(tables(ids))
    const rows = await homes.fanOut(query('desc', 4), { orderBy: (row) => row.id, limit: 4 })
    expect(rows.map((row) => row.id)).toEqual([id(9, 1), id(8, 42), id(7, 63), id(5, 30)])
    expect(rows.map((row) => row.server)).toEqual(['a', 'c', 'c', 'b'])
    const oldest = await homes.fanOut(query('asc', 2), {
      orderBy: (row) => row.id.toString(),
      order: 'asc',
      limit: 2,
    })
    expect(oldest.map((row) => row.id)).toEqual([id(1, 0), id(2, 21)])
  })

  it('equals sorting every row and taking the first ones, for any rows, order and limit', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(
          fc.tuple(
            fc.integer({ min: 0, max: 10_000 }),
            fc.integer({ min: 0, max: 63 }),
            fc.integer({ min: 0, max: 3 }),
          ),
          { selector: ([ms, shard, sequence]) => `${ms}/${shard}/${sequence}`, maxLength: 60 },
        ),
        fc.constantFrom<'asc' | 'desc'>('asc', 'desc'),
        fc.option(fc.integer({ min: 1, max: 70 }), { nil: undefined }),
        fc.integer({ min: 1, max: 4 }),
        async (parts, order, limit, concurrency) => {
          const ids = parts.map(([ms, shard, sequence]) => id(ms, shard, sequence))
          const homes = await open(tables(ids))
          const rows = await homes.fanOut(query(order, limit), {
            orderBy: (row) => row.id,
            order,
            concurrency,
            ...(limit === undefined ? {} : { limit }),
          })
          const expected = [...ids]
            .sort((x, y) => (order === 'desc' ? Number(y - x) : Number(x - y)))
            .slice(0, limit ?? ids.length)
          expect(rows.map((row) => row.id)).toEqual(expected)
        },
      ),
      { numRuns: 150 },
    )
  })

  it('asks only the servers holding the given shards, each about its own', async () => {
    const asked: [string, readonly number[]][] = []
    const homes = await open({ a: [], b: [], c: [] })
    await homes.fanOut(
      async (_table, server, shards) => {
        asked.push([server, shards])
        return []
      },
      { shards: '3-4,45' },
    )
    expect(asked.sort()).toEqual([
      ['a', [3, 4]],
      ['c', [45]],
    ])
    asked.length = 0
    await homes.fanOut(async (_table, server, shards) => {
      asked.push([server, shards])
      return []
    })
    expect(asked.map(([server, shards]) => [server, shards.length]).sort()).toEqual([
      ['a', 21],
      ['b', 21],
      ['c', 22],
    ])
  })

  it('without orderBy, returns each server’s rows as they came, server after server', async () => {
    const homes = await open({ a: [1n], b: [2n, 3n], c: [] })
    const rows = await homes.fanOut(async (table) => table)
    expect(rows).toEqual([1n, 2n, 3n])
  })

  it('drops rows of shards a server was not asked about (old copies of a moved shard)', async () => {
    // Server a still holds a copy of shard 30's row, whose home is b.
    const copy = id(100, 30)
    const servers = { a: [id(1, 0), copy], b: [copy, id(2, 21)], c: [] }
    const homes = await open(servers)
    const everything = async (table: Table, server: string) =>
      [...table].sort((x, y) => Number(y - x)).map((id) => ({ id, server }))
    const rows = await homes.fanOut(everything, { orderBy: (row) => row.id })
    expect(rows).toEqual([
      { id: copy, server: 'b' },
      { id: id(2, 21), server: 'b' },
      { id: id(1, 0), server: 'a' },
    ])
    // With a limit, a server whose full answer held a dropped row may be hiding rows of its own:
    // here the copy's row was deleted on its home since, and a's second row is its own.
    const cut = async (table: Table, server: string) =>
      (await everything(table, server)).slice(0, 2)
    const deleted = await open({ a: [copy, id(60, 0), id(50, 1)], b: [], c: [] })
    await expect(
      deleted.fanOut(cut, { orderBy: (row) => row.id, limit: 2 }),
    ).rejects.toBeInstanceOf(ConfigurationError)
    await expect(deleted.fanOut(cut, { orderBy: (row) => row.id, limit: 2 })).rejects.toThrow(
      /Server a answered 2 rows, as many as the limit, and 1 of them belong to shards it was not asked about/,
    )
    // Unless the merge ends before that server's last row: its own rows past it cannot count.
    const newer = await open({
      a: [copy, id(60, 0), id(50, 1)],
      b: [id(200, 21), id(150, 22)],
      c: [],
    })
    expect(
      (await newer.fanOut(cut, { orderBy: (row) => row.id, limit: 2 })).map((row) => row.id),
    ).toEqual([id(200, 21), id(150, 22)])
    // And a server that returned fewer rows than the limit has nothing more to give.
    const whole = async (table: Table, server: string) =>
      (await everything(table, server)).slice(0, 5)
    expect(
      (await deleted.fanOut(whole, { orderBy: (row) => row.id, limit: 5 })).map((row) => row.id),
    ).toEqual([id(60, 0), id(50, 1)])
  })

  it('refuses a server whose rows are not in the order asked, as that server’s failure', async () => {
    const homes = await open({ a: [id(1, 0), id(2, 1)], b: [], c: [] })
    const error = await homes
      .fanOut(query('asc'), { orderBy: (row) => row.id, order: 'desc' })
      .catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(FanOutError)
    expect((error as FanOutError).failures[0]!.error).toBeInstanceOf(InvalidArgumentError)
    expect((error as FanOutError).retryable).toBe(false)
  })

  it('a failing server gives FanOutError with the merged rows of the others and the failures', async () => {
    const homes = await open(tables([id(1, 0), id(2, 21), id(3, 42), id(4, 43)]))
    const down = new SourceUnavailableError('server b is down')
    const error = await homes
      .fanOut(
        async (table, server, shards) => {
          if (server === 'b') throw down
          return query('desc')(table, server, shards)
        },
        { orderBy: (row) => row.id, limit: 2 },
      )
      .catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(FanOutError)
    const failed = error as FanOutError<Row>
    expect(failed.code).toBe('FAN_OUT_FAILED')
    expect(failed.results.map((row) => row.id)).toEqual([id(4, 43), id(3, 42)])
    expect(failed.failures).toEqual([
      { server: 'b', shards: map.shards().slice(21, 42), error: down },
    ])
    expect(failed.retryable).toBe(true)
    expect(failed.message).toMatch(/failed on 1 of 3 servers \(b: server b is down\)/)
  })

  it('runs at most `concurrency` servers at once', async () => {
    const homes = await open({ a: [], b: [], c: [] })
    let running = 0
    let most = 0
    await homes.fanOut(
      async () => {
        running++
        most = Math.max(most, running)
        await sleep(20)
        running--
        return []
      },
      { concurrency: 2 },
    )
    expect(most).toBe(2)
  })

  it('a signal cancels the fan-out: servers not started are never asked', async () => {
    const homes = await open({ a: [], b: [], c: [] })
    const controller = new AbortController()
    const asked: string[] = []
    let aborted: AbortSignal | undefined
    const call = homes.fanOut(
      async (_table, server, _shards, signal) => {
        asked.push(server)
        aborted = signal
        controller.abort()
        await sleep(50)
        return []
      },
      { concurrency: 1, signal: controller.signal },
    )
    await expect(call).rejects.toBeInstanceOf(CancelledError)
    await sleep(80)
    expect(asked).toEqual(['a'])
    expect(aborted?.aborted).toBe(true)
    await expect(
      homes.fanOut(async () => [], { signal: AbortSignal.abort() }),
    ).rejects.toBeInstanceOf(CancelledError)
  })

  it('refuses options that cannot work, before asking any server', async () => {
    let asked = 0
    const run = async () => {
      asked++
      return []
    }
    const homes = await open({ a: [], b: [], c: [] })
    await expect(homes.fanOut(run, { limit: 5 })).rejects.toThrow(/limit needs orderBy/)
    await expect(homes.fanOut(run, { order: 'asc' })).rejects.toThrow(/order needs orderBy/)
    await expect(homes.fanOut(run, { concurrency: 0 })).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(homes.fanOut(run, { shards: [64] })).rejects.toBeInstanceOf(ShardOutOfRangeError)
    await expect(homes.fanOut(run, { limt: 5 } as never)).rejects.toThrow(/Did you mean "limit"/)
    await expect(homes.fanOut('SELECT 1' as never)).rejects.toBeInstanceOf(InvalidArgumentError)
    expect(asked).toBe(0)
  })
})
