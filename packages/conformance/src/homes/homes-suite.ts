import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import * as core from '@shardflake/core'
import {
  CancelledError,
  ConfigurationError,
  type CreatedDirectory,
  DirectoryChangedError,
  type DirectoryEntry,
  defineSharding,
  FanOutError,
  InProcessSource,
  InvalidArgumentError,
  instagram,
  type ShardDirectory,
  ShardflakeError,
  ShardHomes,
  type Sharding,
  ShardingMismatchError,
  ShardMap,
  ShardMovingError,
  ShardOutOfRangeError,
  TimedOutError,
} from '@shardflake/core'
import fc from 'fast-check'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import type { Dialect } from '../databases'
import { type HomeServer, type HomeServers, shardBits, startHomeServers } from './home-servers'

/** A database directory as the suite uses it: a `ShardDirectory` that can be created. */
export interface DirectoryUnderTest extends ShardDirectory {
  create(map: ShardMap<string>, signal?: AbortSignal): Promise<CreatedDirectory>
}

/** What {@link describeShardHomes} takes. */
export interface ShardHomesSuiteOptions {
  readonly dialect: Dialect
  /**
   * Opens the directory under test on the database at `url` (a pool of its own), with these
   * options; `end()` ends that pool.
   */
  openDirectory(
    url: string,
    options: {
      sharding: Sharding
      table: string
      maxStaleMs?: number
      timeoutMs?: number
    },
  ): { directory: DirectoryUnderTest; end(): Promise<void> }
  /**
   * A Node script (built packages) that calls `runHomesChild` of
   * `@shardflake/conformance/fixtures/homes-child.mjs` with a function opening the same directory
   * on `DIRECTORY_URL`.
   */
  readonly childScript: string
}

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const firstMap = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * The contract of a database shard directory and of `ShardHomes` over it, on three throwaway
 * servers of the dialect (a, b, c): create/read/compare-and-set with typed refusals, a race of
 * compare-and-sets between pools and between processes (exactly one winner per version), the
 * deadline, a process paused past `maxStaleMs` that reads again before it routes, writes waiting
 * for a move, and fan-out over real SQL with merge order, limit and a server down.
 */
export function describeShardHomes(name: string, options: ShardHomesSuiteOptions): void {
  const { dialect } = options
  // The shard bits of an ID in SQL (the Instagram layout: 13 shard bits above 10 sequence bits).
  const shardOf = `((id >> ${sharding.layout.shifts.shard}) & ${2 ** sharding.layout.shardBits - 1})`
  let homeServers: HomeServers
  let tables = 0
  const ends: (() => Promise<void>)[] = []

  /** A directory in a table of its own on server `on`, ended after the suite. */
  function open(
    extra: { maxStaleMs?: number; timeoutMs?: number; table?: string } = {},
    on = 'a',
  ): DirectoryUnderTest {
    const table = extra.table ?? `dir_${++tables}`
    const { directory, end } = options.openDirectory(homeServers.server(on).url, {
      sharding,
      ...extra,
      table,
    })
    ends.push(end)
    return directory
  }

  /** A child process running the fixture; its output lines as they come. */
  function child(env: Record<string, string>) {
    const lines: string[] = []
    const proc: ChildProcess = spawn(process.execPath, [options.childScript], {
      env: {
        ...process.env,
        DIRECTORY_URL: homeServers.server('a').url,
        LOGICAL_SHARDS: String(sharding.logicalShards),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let rest = ''
    let errors = ''
    proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const parts = (rest + chunk).split('\n')
      rest = parts.pop()!
      lines.push(...parts)
    })
    proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      errors += chunk
    })
    const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve))
    onTestFinished(() => {
      proc.kill('SIGKILL')
    })
    const waitFor = async (done: () => boolean, what: string) => {
      for (let waited = 0; !done(); waited += 10) {
        if (proc.exitCode !== null || waited > 30_000) {
          throw new Error(`The child did not ${what} (exit ${proc.exitCode}):\n${errors}`)
        }
        await sleep(10)
      }
    }
    return { proc, lines, exited, waitFor, stderr: () => errors }
  }

  describe(`shard directory and ShardHomes: ${name}`, () => {
    beforeAll(async () => {
      homeServers = await startHomeServers(dialect)
    }, 180_000)
    afterAll(async () => {
      await Promise.all(ends.map((end) => end()))
      await homeServers?.close()
    }, 60_000)

    it('create() records the first homes once; it is idempotent and keeps what moves changed', async () => {
      const directory = open({ maxStaleMs: 3000, table: 'dir_create' })
      const first = await directory.create(firstMap)
      expect(first.created).toBe(true)
      expect(first.snapshot.version).toBe(1n)
      expect(first.snapshot.maxStaleMs).toBe(3000)
      expect(first.snapshot.entries).toEqual([
        { from: 0, to: 20, server: 'a', state: 'serving' },
        { from: 21, to: 41, server: 'b', state: 'serving' },
        { from: 42, to: 63, server: 'c', state: 'serving' },
      ])
      const moved = first.snapshot.entries.map((entry) =>
        entry.from === 21 ? { ...entry, server: 'c' } : entry,
      )
      await directory.compareAndSet(1n, moved)
      const again = await directory.create(firstMap)
      expect(again.created).toBe(false)
      expect(again.snapshot.version).toBe(2n)
      expect(again.snapshot.entries[1]!.server).toBe('c')
      // What is stored, read with raw SQL: one row, the version, the homes as JSON.
      const rows = await homeServers
        .server('a')
        .query('SELECT version, max_stale_ms, entries FROM dir_create')
      expect(rows).toHaveLength(1)
      expect(String(rows[0]!.version)).toBe('2')
      expect(Number(rows[0]!.max_stale_ms)).toBe(3000)
      const stored = rows[0]!.entries
      expect(typeof stored === 'string' ? JSON.parse(stored) : stored).toEqual(moved)
      // Another process of the same application reads the same.
      const reader = open({ table: 'dir_create' })
      expect((await reader.read()).entries).toEqual(again.snapshot.entries)
    })

    it('refuses another sharding, another maxStaleMs and a directory never created, typed', async () => {
      const directory = open({ table: 'dir_refusals' })
      await expect(directory.read()).rejects.toThrow(ConfigurationError)
      await expect(directory.read()).rejects.toThrow(/create it once with directory.create/)
      await expect(directory.compareAndSet(1n, [])).rejects.toBeInstanceOf(InvalidArgumentError)
      await directory.create(firstMap)
      const other = defineSharding({ layout: instagram, logicalShards: 65 })
      const { directory: wrong, end } = options.openDirectory(homeServers.server('a').url, {
        sharding: other,
        table: 'dir_refusals',
      })
      ends.push(end)
      await expect(wrong.read()).rejects.toBeInstanceOf(ShardingMismatchError)
      await expect(wrong.create(ShardMap.single(other, 'a'))).rejects.toBeInstanceOf(
        ShardingMismatchError,
      )
      await expect(directory.create(ShardMap.single(other, 'a'))).rejects.toBeInstanceOf(
        ShardingMismatchError,
      )
      const impatient = open({ table: 'dir_refusals', maxStaleMs: 1234 })
      await expect(impatient.read()).rejects.toThrow(
        /created with maxStaleMs 5000, but this process is configured with 1234/,
      )
      await expect(impatient.create(firstMap)).rejects.toBeInstanceOf(ConfigurationError)
      await expect(
        ShardHomes.open({ sharding: other, servers: { a: 1 }, directory }),
      ).rejects.toBeInstanceOf(ShardingMismatchError)
      await expect(
        ShardHomes.open({ sharding, servers: { a: 1, b: 2 }, directory }),
      ).rejects.toThrow(/server "c", which is not among this process's servers/)
    })

    it('compare-and-set: the winner bumps the version; a stale one loses typed and writes nothing', async () => {
      const directory = open()
      await directory.create(firstMap)
      const switching = (await directory.read()).entries.map(
        (entry): DirectoryEntry => (entry.from === 0 ? { ...entry, state: 'switching' } : entry),
      )
      const next = await directory.compareAndSet(1n, switching)
      expect(next.version).toBe(2n)
      expect(next.entries[0]!.state).toBe('switching')
      const lost = await directory
        .compareAndSet(
          1n,
          firstMap.ranges.map(({ from, to, target }) => ({
            from,
            to,
            server: target,
            state: 'serving' as const,
          })),
        )
        .catch((error: unknown) => error)
      expect(lost).toBeInstanceOf(DirectoryChangedError)
      expect((lost as Error).message).toMatch(/at version 2, not 1/)
      expect((await directory.read()).entries[0]!.state).toBe('switching')
      // Bad entries are refused before anything is written.
      const overlapping = [
        ...switching,
        { from: 20, to: 22, server: 'a', state: 'serving' as const },
      ]
      await expect(directory.compareAndSet(2n, overlapping)).rejects.toBeInstanceOf(
        InvalidArgumentError,
      )
      await expect(
        directory.compareAndSet(2n, [{ from: 0, to: 64, server: 'a', state: 'serving' }]),
      ).rejects.toBeInstanceOf(ShardOutOfRangeError)
      await expect(
        directory.compareAndSet(2n, [{ from: 0, to: 63, server: 'a', state: 'moving' as never }]),
      ).rejects.toBeInstanceOf(InvalidArgumentError)
      await expect(directory.compareAndSet(2 as never, switching)).rejects.toBeInstanceOf(
        InvalidArgumentError,
      )
      expect((await directory.read()).version).toBe(2n)
    })

    it('compare-and-set races between pools: exactly one winner per version', async () => {
      const table = `dir_race_${++tables}`
      const first = open({ table })
      await first.create(firstMap)
      const racers = Array.from({ length: 8 }, () => open({ table }))
      const rounds = 15
      let winners = 0
      for (let round = 0; round < rounds; round++) {
        const snapshots = await Promise.all(racers.map((racer) => racer.read()))
        const outcomes = await Promise.allSettled(
          racers.map((racer, index) =>
            racer.compareAndSet(
              snapshots[index]!.version,
              snapshots[index]!.entries.map((entry, at) =>
                at === 0 ? { ...entry, server: `racer-${index}` } : entry,
              ),
            ),
          ),
        )
        const won = outcomes.filter((outcome) => outcome.status === 'fulfilled')
        const lost = outcomes.filter((outcome) => outcome.status === 'rejected')
        expect(won).toHaveLength(1)
        for (const outcome of lost) expect(outcome.reason).toBeInstanceOf(DirectoryChangedError)
        winners += won.length
        const winner = (won[0] as PromiseFulfilledResult<{ entries: readonly DirectoryEntry[] }>)
          .value
        expect((await first.read()).entries[0]!.server).toBe(winner.entries[0]!.server)
      }
      expect(winners).toBe(rounds)
      expect((await first.read()).version).toBe(BigInt(rounds + 1))
    })

    it('compare-and-set races between processes: every version is won exactly once', async () => {
      const table = `dir_procs_${++tables}`
      await open({ table }).create(firstMap)
      const attempts = 40
      const startAt = String(Date.now() + 1500)
      const children = Array.from({ length: 4 }, (_, id) =>
        child({
          MODE: 'cas',
          TABLE: table,
          ID: String(id),
          ATTEMPTS: String(attempts),
          START_AT: startAt,
        }),
      )
      for (const { waitFor, lines } of children) {
        await waitFor(() => lines.includes('DONE'), 'finish its attempts')
      }
      // "W <the version it read> <the version its change made>": a win is based on what it read.
      const won = children.flatMap(({ lines }) =>
        lines
          .filter((line) => line.startsWith('W '))
          .map((line) => line.slice(2).split(' ').map(BigInt) as [bigint, bigint]),
      )
      for (const [read, made] of won) expect(made).toBe(read + 1n)
      const wins = won.map(([, made]) => made)
      const losses = children.flatMap(({ lines }) => lines.filter((line) => line === 'L'))
      const final = (await open({ table }).read()).version
      console.info(
        `${name}: ${children.length} processes, ${wins.length} compare-and-sets won, ${losses.length} lost, version 1 -> ${final}`,
      )
      expect(wins.length + losses.length).toBe(children.length * attempts)
      expect(losses.length).toBeGreaterThan(0) // they did race
      expect(new Set(wins).size).toBe(wins.length)
      expect(BigInt(wins.length)).toBe(final - 1n)
      expect([...wins].sort((x, y) => Number(x - y))).toEqual(
        Array.from({ length: wins.length }, (_, index) => BigInt(index + 2)),
      )
    }, 120_000)

    it('every call has a deadline: a server that does not answer gives TimedOutError, a signal CancelledError', async () => {
      const server = homeServers.server('c')
      const table = `dir_deadline_${++tables}`
      await open({ table }, 'c').create(firstMap)
      await server.process!.kill('SIGSTOP')
      await waitUntilStopped(server.process!.pid!)
      try {
        // New connections are not answered (a PostgreSQL backend already connected would be).
        const directory = open({ table, timeoutMs: 500 }, 'c')
        await expect(directory.read()).rejects.toBeInstanceOf(TimedOutError)
        const controller = new AbortController()
        const read = open({ table, timeoutMs: 60_000 }, 'c').read(controller.signal)
        await sleep(50)
        controller.abort()
        await expect(read).rejects.toBeInstanceOf(CancelledError)
      } finally {
        await server.process!.kill('SIGCONT')
      }
      const directory = open({ table }, 'c')
      await expect(directory.read(AbortSignal.abort())).rejects.toBeInstanceOf(CancelledError)
      expect((await directory.read()).version).toBe(1n)
      await directory.close()
      await expect(directory.read()).rejects.toBeInstanceOf(ConfigurationError)
    })

    it('a statement that waits past the deadline is stopped on the server', async () => {
      const table = `dir_locked_${++tables}`
      const directory = open({ table, timeoutMs: 300 })
      await directory.create(firstMap)
      const unlock = await lockTable(dialect, homeServers.server('a').url, table)
      try {
        await expect(directory.read()).rejects.toBeInstanceOf(TimedOutError)
        // The read was cancelled on the server, not left waiting for the lock.
        const waiting = async () =>
          (
            await homeServers
              .server('a')
              .query(
                dialect === 'postgres'
                  ? `SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%max_stale_ms%${table}%' AND pid <> pg_backend_pid()`
                  : `SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE '%max_stale_ms%${table}%' AND ID <> CONNECTION_ID()`,
              )
          )[0]!.n
        for (let waited = 0; Number(await waiting()) > 0 && waited < 5000; waited += 50) {
          await sleep(50)
        }
        expect(Number(await waiting())).toBe(0)
      } finally {
        await unlock()
      }
      expect((await directory.read()).version).toBe(1n)
    })

    it('a process paused past maxStaleMs reads the directory again before it routes', async () => {
      const table = `dir_paused_${++tables}`
      const maxStaleMs = 1000
      const directory = open({ table, maxStaleMs })
      await directory.create(firstMap)
      const shard = 5 // on a
      const { proc, lines, waitFor } = child({
        MODE: 'route',
        TABLE: table,
        SHARD: String(shard),
        REFRESH_MS: '300',
      })
      await waitFor(() => lines.filter((line) => line.startsWith('R ')).length > 20, 'route')
      proc.kill('SIGSTOP')
      await waitUntilStopped(proc.pid!)
      await sleep(100) // the pipe drains
      const before = lines.length
      // The move: shard 5's range goes to b while the process sleeps.
      const current = await directory.read()
      await directory.compareAndSet(
        current.version,
        current.entries.map((entry) => (entry.from === 0 ? { ...entry, server: 'b' } : entry)),
      )
      await sleep(maxStaleMs + 500)
      proc.kill('SIGCONT')
      await waitFor(
        () => lines.slice(before).filter((line) => line.endsWith(' b')).length > 20,
        'route to b',
      )
      proc.kill('SIGKILL')
      const parsed = lines
        .filter((line) => /^[RWE] /.test(line))
        .map((line) => {
          const [kind, t, result] = line.split(' ')
          return { kind: kind!, t: Number(t), result: result! }
        })
      // The pause is the longest gap between two consecutive routings on the child's own clock.
      const times = parsed.map((entry) => entry.t).sort((x, y) => x - y)
      let gapAt = 1
      for (let i = 2; i < times.length; i++) {
        if (times[i]! - times[i - 1]! > times[gapAt]! - times[gapAt - 1]!) gapAt = i
      }
      const pausedAt = times[gapAt - 1]!
      const resumedAt = times[gapAt]!
      expect(resumedAt - pausedAt).toBeGreaterThan(maxStaleMs)
      const earlier = parsed.filter((entry) => entry.t < resumedAt)
      const after = parsed.filter((entry) => entry.t >= resumedAt)
      expect(earlier.filter((entry) => entry.result !== 'a' && entry.kind !== 'E')).toEqual([])
      // After the pause: never the old home; refused (stale) until the new reading, then b.
      expect(after.filter((entry) => entry.result === 'a')).toEqual([])
      expect(
        after.every((entry) => entry.result === 'b' || entry.result === 'DIRECTORY_STALE'),
      ).toBe(true)
      expect(
        after.filter((entry) => entry.kind === 'W' && entry.result === 'b').length,
      ).toBeGreaterThan(0)
      console.info(
        `${name}: paused ${Math.round(resumedAt - pausedAt)} ms (maxStaleMs ${maxStaleMs}); after it ${after.filter((entry) => entry.result === 'DIRECTORY_STALE').length} refusals (stale), ${after.filter((entry) => entry.result === 'b').length} routings to the new home, 0 to the old`,
      )
    }, 120_000)

    it('writes wait while a shard switches and go to its new home; past switchWaitMs they fail typed', async () => {
      const table = `dir_wait_${++tables}`
      const directory = open({ table, maxStaleMs: 1000 })
      await directory.create(firstMap)
      const mover = open({ table })
      const homes = await ShardHomes.open({
        sharding,
        servers: { a: 'a', b: 'b', c: 'c' },
        directory,
        refreshMs: 200,
        switchWaitMs: 30_000,
      })
      onTestFinished(() => homes.close())
      const setRange = async (from: number, change: Partial<DirectoryEntry>) => {
        const current = await mover.read()
        return mover.compareAndSet(
          current.version,
          current.entries.map((entry) => (entry.from === from ? { ...entry, ...change } : entry)),
        )
      }
      await setRange(21, { state: 'switching' })
      await homes.refresh()
      expect(homes.serverOf(30)).toBe('b')
      let settled = false
      const write = homes.writeHome(30).finally(() => {
        settled = true
      })
      await sleep(300)
      expect(settled).toBe(false)
      await setRange(21, { state: 'arriving', server: 'c' })
      await sleep(300)
      expect(settled).toBe(false)
      await setRange(21, { state: 'serving' })
      expect((await write).server).toBe('c')
      // A switch that outlasts switchWaitMs: a retryable ShardMovingError.
      await setRange(42, { state: 'switching' })
      const impatient = await ShardHomes.open({
        sharding,
        servers: { a: 'a', b: 'b', c: 'c' },
        directory,
        refreshMs: 200,
        switchWaitMs: 300,
      })
      onTestFinished(() => impatient.close())
      const error = await impatient.writeHome(50).catch((caught: unknown) => caught)
      expect(error).toBeInstanceOf(ShardMovingError)
      expect((error as ShardflakeError).retryable).toBe(true)
    })

    it('any input to the directory works or fails with a ShardflakeError of a known code', async () => {
      const table = `dir_inputs_${++tables}`
      const directory = open({ table })
      await directory.create(firstMap)
      const known = new Set(
        Object.values(core).flatMap((value) =>
          typeof value === 'function' && value.prototype instanceof ShardflakeError
            ? [(value as typeof ShardflakeError).code]
            : [],
        ),
      )
      const typed = async (work: () => unknown) => {
        try {
          await work()
        } catch (error) {
          if (!(error instanceof ShardflakeError)) throw error
          expect(known).toContain(error.code)
        }
      }
      const anything = fc.anything({ withBigInt: true, withNullPrototype: true })
      const entries = fc.oneof(
        fc.array(
          fc.record({
            from: fc.oneof(fc.integer({ min: -1, max: 65 }), anything),
            to: fc.oneof(fc.integer({ min: -1, max: 65 }), anything),
            server: fc.oneof(fc.constantFrom('a', 'b', 'c', ''), anything),
            state: fc.oneof(fc.constantFrom('serving', 'switching', 'arriving'), anything),
          }),
          { maxLength: 3 },
        ),
        anything,
      )
      await fc.assert(
        fc.asyncProperty(anything, entries, anything, async (value, list, extra) => {
          await typed(() =>
            options.openDirectory(homeServers.server('a').url, {
              sharding,
              table,
              ...(typeof extra === 'object' && extra !== null ? extra : {}),
              maxStaleMs: value as number,
            }),
          )
          await typed(() => options.openDirectory(homeServers.server('a').url, value as never))
          await typed(() => directory.read(value as never))
          await typed(() => directory.create(value as never))
          await typed(() => directory.compareAndSet(value as never, list as never))
          const current = await directory.read()
          await typed(() => directory.compareAndSet(current.version, list as never))
        }),
        { numRuns: 60 },
      )
      // Whatever was accepted is a shard map: the directory still reads.
      expect((await directory.read()).entries.length).toBeGreaterThan(0)
    })

    it('fan-out over three servers with real SQL: merged by ID with a limit, typed partial failure', async () => {
      await homeServers.everywhere(
        dialect === 'postgres'
          ? 'CREATE TABLE IF NOT EXISTS posts (id bigint PRIMARY KEY, title text NOT NULL)'
          : 'CREATE TABLE IF NOT EXISTS posts (id BIGINT PRIMARY KEY, title TEXT NOT NULL)',
      )
      const homes = await ShardHomes.open({
        sharding,
        servers: Object.fromEntries(homeServers.servers.map((server) => [server.name, server])),
        directory: firstMap,
      })
      onTestFinished(() => homes.close())
      // 300 posts, each written on its shard's home, one INSERT per server.
      const source = new InProcessSource({ sharding, shards: 'all' })
      onTestFinished(() => source.close())
      const posts = Array.from({ length: 300 }, (_, index) => {
        const id = source.nextId(index % 64)
        return { id, title: `post ${index}` }
      })
      const groups = await homes.writeGroups(posts, (post) => sharding.shardOfId(post.id))
      expect([...groups.keys()].sort()).toEqual(['a', 'b', 'c'])
      for (const [, { handle, items }] of groups) {
        const values = items.map((_, index) =>
          dialect === 'postgres' ? `($${2 * index + 1}, $${2 * index + 2})` : '(?, ?)',
        )
        await handle.query(
          `INSERT INTO posts (id, title) VALUES ${values.join(', ')}`,
          items.flatMap((post) => [post.id.toString(), post.title]),
        )
      }
      const counts: Record<string, number> = {}
      expect(
        await homeServers.misplaced({
          table: 'posts',
          sharding,
          homeOf: (shard) => firstMap.targetFor(shard),
          counts,
        }),
      ).toEqual([])
      expect(counts.a! + counts.b! + counts.c!).toBe(300)
      expect(Math.min(counts.a!, counts.b!, counts.c!)).toBeGreaterThan(0)

      const newest =
        (limit: number, order: 'desc' | 'asc' = 'desc') =>
        async (server: HomeServer, _name: string, shards: readonly number[]) =>
          (await server.query(
            dialect === 'postgres'
              ? `SELECT id::text AS id, title FROM posts WHERE ${shardOf} = ANY($1::int[]) ORDER BY id ${order} LIMIT $2`
              : `SELECT CAST(id AS CHAR) AS id, title FROM posts WHERE ${shardOf} IN (?) ORDER BY id ${order} LIMIT ?`,
            [shards, limit],
          )) as { id: string; title: string }[]
      const all = posts.map((post) => post.id).sort((x, y) => (x < y ? 1 : x > y ? -1 : 0))
      const feed = await homes.fanOut(newest(25), { orderBy: (post) => post.id, limit: 25 })
      expect(feed.map((post) => BigInt(post.id))).toEqual(all.slice(0, 25))
      const oldest = await homes.fanOut(newest(7, 'asc'), {
        orderBy: (post) => post.id,
        order: 'asc',
        limit: 7,
        concurrency: 1,
      })
      expect(oldest.map((post) => BigInt(post.id))).toEqual([...all].reverse().slice(0, 7))
      // Only the servers of the shards asked about, each about its own.
      const some = await homes.fanOut(newest(1000), { orderBy: (post) => post.id, shards: [3, 50] })
      expect(some.map((post) => BigInt(post.id))).toEqual(
        all.filter((id) => [3, 50].includes(shardBits(sharding, id))),
      )
      // Server b down: the rows of a and c, and b's failure.
      const b = homeServers.server('b').process!
      await b.kill('SIGKILL')
      try {
        const error = await homes
          .fanOut(newest(25), { orderBy: (post) => post.id, limit: 25 })
          .catch((caught: unknown) => caught)
        expect(error).toBeInstanceOf(FanOutError)
        const failed = error as FanOutError<{ id: string }>
        expect(failed.failures.map((failure) => failure.server)).toEqual(['b'])
        expect(failed.results.map((post) => BigInt(post.id))).toEqual(
          all.filter((id) => firstMap.targetForId(id) !== 'b').slice(0, 25),
        )
        console.info(`${name}: fan-out with server b killed: ${failed.message}`)
      } finally {
        await b.restart()
      }
      expect(
        await homes.fanOut(newest(25), { orderBy: (post) => post.id, limit: 25 }),
      ).toHaveLength(25)
    }, 120_000)
  })
}

/** Holds an exclusive lock on `table` in a session of its own until the returned function runs. */
async function lockTable(
  dialect: Dialect,
  url: string,
  table: string,
): Promise<() => Promise<void>> {
  if (dialect === 'postgres') {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query('BEGIN')
    await client.query(`LOCK TABLE "${table}" IN ACCESS EXCLUSIVE MODE`)
    return async () => {
      await client.query('ROLLBACK')
      await client.end()
    }
  }
  const connection = await mysql.createConnection({ uri: url })
  await connection.query(`LOCK TABLES \`${table}\` WRITE`)
  return async () => {
    await connection.query('UNLOCK TABLES')
    await connection.end()
  }
}

/** Waits until the process is stopped (state T in /proc). */
async function waitUntilStopped(pid: number): Promise<void> {
  for (let waited = 0; waited < 5000; waited += 5) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
    if (state === 'T') return
    await sleep(5)
  }
  throw new Error(`Process ${pid} did not stop.`)
}
