import { type ChildProcess, spawn } from 'node:child_process'
import {
  abortShardHomesMove,
  ConfigurationError,
  type DirectoryEntry,
  defineSharding,
  HomesSource,
  type IdSource,
  InProcessSource,
  InvalidArgumentError,
  InvalidIdentifierError,
  instagram,
  type MoveShardHomesOptions,
  moveShardHomes,
  type RowStore,
  RowsMismatchError,
  ShardflakeError,
  ShardHomes,
  ShardMap,
  ShardMovedError,
  ShardMovingError,
} from '@shardflake/core'
import mysql from 'mysql2/promise'
import pgDriver from 'pg'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import type { Dialect } from '../databases'
import { type HomeServer, type HomeServers, shardBits, startHomeServers } from './home-servers'
import type { DirectoryUnderTest } from './homes-suite'

/** What {@link describeRowMoves} takes. */
export interface RowMovesSuiteOptions {
  readonly dialect: Dialect
  /** Opens the dialect's directory on the database at `url` (a pool of its own). */
  openDirectory(
    url: string,
    options: { sharding: ReturnType<typeof defineSharding>; table: string; maxStaleMs?: number },
  ): { directory: DirectoryUnderTest; end(): Promise<void> }
  /** Opens the dialect's row store on the database at `url` (a pool of its own). */
  openStore(url: string): { store: RowStore; end(): Promise<void> }
  /**
   * IDs from the servers: installs the dialect's ID generation on each server for the shards
   * `map` gives it, opens one source per server (by name), and moves ID generation between
   * servers (`movePostgresShards` / `moveMysqlShards`) as `moveIds`.
   */
  openIdSources(
    urls: Readonly<Record<string, string>>,
    sharding: ReturnType<typeof defineSharding>,
    map: ShardMap<string>,
  ): Promise<{
    sources: Record<string, IdSource>
    moveIds: NonNullable<MoveShardHomesOptions['moveIds']>
    end(): Promise<void>
  }>
  /**
   * A Node script (built packages) calling `runRowMoveChild` of
   * `@shardflake/conformance/fixtures/row-move-child.mjs` with the dialect's directory and store.
   */
  readonly childScript: string
}

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const firstMap = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])
/** The 16 shards moved from a to c. */
const MOVING = Array.from({ length: 16 }, (_, shard) => shard)
/**
 * The directory's maxStaleMs: a write routed before a switch must end within it. 400 ms made the
 * moves quick but was outlasted, now and then, by a write stalled behind a loaded machine's other
 * test files (the guarantee then does not hold, by its own terms); 1500 still keeps writes waiting
 * through a switch, at a third of the default.
 */
const MAX_STALE_MS = 400
/** Driver codes of a transaction rolled back by a deadlock (MariaDB/MySQL, PostgreSQL). */
const DEADLOCKS = new Set(['ER_LOCK_DEADLOCK', '40P01'])
/** A test still running after this long prints what the servers are doing. */
const STALL_REPORT_MS = 150_000
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** One post the test wrote, as acknowledged. */
interface LedgerPost {
  readonly id: string
  readonly shard: number
  body: string
  deleted: boolean
  /** Only doomed posts are deleted; readers read the others. */
  readonly doomed: boolean
  busy: boolean
  /** A write failed in a way that leaves its outcome unknown: its body is not checked. */
  unsure: boolean
  readonly comments: string[]
}

/**
 * Moves of logical shards with their rows (`moveShardHomes`) on three throwaway servers of the
 * dialect: 16 of 64 shards a→c while writers insert, update and delete through `ShardHomes` and
 * readers read by ID (nothing lost, nothing misplaced, no ID twice); a mover killed with SIGKILL
 * and resumed, or aborted; a target row corrupted during the switch (typed error, no flip); and
 * typed refusals of bad input before anything is written.
 */
export function describeRowMoves(name: string, options: RowMovesSuiteOptions): void {
  const { dialect } = options
  const pg = dialect === 'postgres'
  let homeServers: HomeServers
  const ends: (() => Promise<void>)[] = []
  const stores: Record<string, RowStore> = {}

  /** PostgreSQL-style SQL for the dialect: `$1::bigint` and `$1` parameters, `::text` casts. */
  const sql = (text: string) =>
    pg
      ? text
      : text
          .replace(/\$\d+::bigint/g, 'CAST(? AS SIGNED)')
          .replace(/\$\d+/g, '?')
          .replace(/(\w+)::text/g, 'CAST($1 AS CHAR)')
  const run = (server: HomeServer, text: string, params: unknown[] = []) =>
    server.query(sql(text), params)

  async function createTables(prefix: string) {
    const posts = `${prefix}_posts`
    const comments = `${prefix}_comments`
    await homeServers.everywhere(
      pg
        ? `CREATE TABLE ${posts} (id bigint PRIMARY KEY, title text NOT NULL, body text, version int NOT NULL DEFAULT 1, created timestamptz NOT NULL DEFAULT now(), data bytea, tags text[]);
           CREATE TABLE ${comments} (id bigint PRIMARY KEY, post_id bigint NOT NULL REFERENCES ${posts} (id) ON DELETE CASCADE, body text)`
        : `CREATE TABLE ${posts} (id BIGINT PRIMARY KEY, title VARCHAR(200) NOT NULL, body TEXT, version INT NOT NULL DEFAULT 1, created DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), data VARBINARY(64), score DOUBLE) ENGINE=InnoDB;
           CREATE TABLE ${comments} (id BIGINT PRIMARY KEY, post_id BIGINT NOT NULL, body TEXT, FOREIGN KEY (post_id) REFERENCES ${posts} (id) ON DELETE CASCADE) ENGINE=InnoDB`,
    )
    return { posts, comments }
  }

  async function openDirectory(table: string) {
    const { directory, end } = options.openDirectory(homeServers.server('a').url, {
      sharding,
      table,
      maxStaleMs: MAX_STALE_MS,
    })
    ends.push(end)
    await directory.create(firstMap)
    return directory
  }

  /** The application: ShardHomes over the directory, with writers and readers and their ledger. */
  function application(
    directory: DirectoryUnderTest,
    tables: { posts: string; comments: string },
    serverSources?: Readonly<Record<string, IdSource>>,
  ) {
    const inProcess = new InProcessSource({ sharding, shards: 'all' })
    onTestFinished(() => inProcess.close())
    let source: IdSource = inProcess
    const ledger: LedgerPost[] = []
    const writerErrors: Record<string, number> = {}
    const readerErrors: Record<string, number> = {}
    const counts = { inserts: 0, updates: 0, deletes: 0, reads: 0, missing: 0, foreign: 0, late: 0 }
    let homes: ShardHomes<HomeServer>
    let running = true
    // A test that failed or timed out stops its writers and readers too: left running, they would
    // hold the servers' connections the next tests need.
    onTestFinished(() => {
      running = false
    })
    const loops: Promise<void>[] = []
    let serial = 0
    /** The mover's phases as the test saw them (reported if the test stalls). */
    const progress: string[] = []
    reportIfStalled(STALL_REPORT_MS, () => ({
      progress: progress.slice(-40),
      posts: ledger.length,
      counts,
      writerErrors,
      readerErrors,
      running,
    }))

    /** The first error that was neither the library's retryable one nor a deadlock, for the report. */
    const foreign: string[] = []
    const note = (errors: Record<string, number>, error: unknown) => {
      const driverCode = (error as { code?: unknown } | null)?.code
      const code =
        error instanceof ShardflakeError
          ? error.code
          : typeof driverCode === 'string'
            ? driverCode
            : 'NOT_TYPED'
      errors[code] = (errors[code] ?? 0) + 1
      // The application's own statements may meet a deadlock (InnoDB's gap locks, with the mover
      // writing rows between other shards' rows on the target): rolled back, never acknowledged,
      // retried as every application retries them.
      const retryable = (error instanceof ShardflakeError && error.retryable) || DEADLOCKS.has(code)
      if (!retryable) {
        counts.foreign++
        if (foreign.length === 0)
          foreign.push(error instanceof Error ? (error.stack ?? error.message) : String(error))
      }
    }

    /**
     * A statement on the shard's write home. Counted as `late` when it ended more than maxStaleMs
     * after it was routed: the moves' guarantee assumes no write does (reported with failures).
     */
    async function write(shard: number, sql: string, params: unknown[]) {
      const { handle } = await homes.writeHome(shard)
      const routed = performance.now()
      try {
        return await run(handle, sql, params)
      } finally {
        if (performance.now() - routed > MAX_STALE_MS) counts.late++
      }
    }

    async function insert(shard: number, doomed: boolean) {
      const id = (await source.nextId(shard)).toString()
      const body = `body ${++serial}`
      await write(
        shard,
        pg
          ? `INSERT INTO ${tables.posts} (id, title, body, data, tags) VALUES ($1::bigint, $2, $3, $4, ARRAY['x', $2])`
          : `INSERT INTO ${tables.posts} (id, title, body, data, score) VALUES ($1::bigint, $2, $3, $4, 0.1)`,
        [id, `title ${id} "quoted" ü`, body, Buffer.from([0, 1, 2, 255, serial % 256])],
      )
      // Busy from the start: while the comment's ID is drawn (a round trip with a server's
      // source), another writer must not pick the post to delete it under its comment.
      const post: LedgerPost = {
        id,
        shard,
        body,
        deleted: false,
        doomed,
        busy: true,
        unsure: false,
        comments: [],
      }
      ledger.push(post)
      counts.inserts++
      try {
        const commentId = (await source.nextId(shard)).toString()
        await write(
          shard,
          `INSERT INTO ${tables.comments} (id, post_id, body) VALUES ($1::bigint, $2::bigint, $3)`,
          [commentId, id, `comment on ${id}`],
        )
        post.comments.push(commentId)
      } finally {
        post.busy = false
      }
    }

    const pick = (wanted: (post: LedgerPost) => boolean) => {
      for (let attempt = 0; attempt < 20 && ledger.length > 0; attempt++) {
        const post = ledger[Math.floor(Math.random() * ledger.length)]!
        if (wanted(post)) return post
      }
      return undefined
    }

    async function writer() {
      while (running) {
        const roll = Math.random()
        try {
          if (roll < 0.5) {
            // Mostly the moving shards (0-15), some staying on a (16-20).
            await insert(Math.floor(Math.random() * 21), Math.random() < 0.3)
          } else if (roll < 0.85) {
            const post = pick((p) => !p.busy && !p.deleted)
            if (!post) continue
            post.busy = true
            const body = `body ${++serial}`
            try {
              await write(
                post.shard,
                `UPDATE ${tables.posts} SET body = $1, version = version + 1 WHERE id = $2::bigint`,
                [body, post.id],
              )
              post.body = body
              counts.updates++
            } catch (error) {
              if (!(error instanceof ShardMovingError)) post.unsure = true
              throw error
            } finally {
              post.busy = false
            }
          } else {
            const post = pick((p) => p.doomed && !p.busy && !p.deleted)
            if (!post) continue
            post.busy = true
            try {
              await write(post.shard, `DELETE FROM ${tables.posts} WHERE id = $1::bigint`, [
                post.id,
              ])
              post.deleted = true
              counts.deletes++
            } catch (error) {
              if (!(error instanceof ShardMovingError)) post.unsure = true
              throw error
            } finally {
              post.busy = false
            }
          }
        } catch (error) {
          note(writerErrors, error)
          await sleep(5)
        }
      }
    }

    async function reader() {
      while (running) {
        const post = pick((p) => !p.doomed)
        if (!post) {
          await sleep(5)
          continue
        }
        try {
          const rows = await run(
            homes.forId(BigInt(post.id)),
            `SELECT id::text AS id FROM ${tables.posts} WHERE id = $1::bigint`,
            [post.id],
          )
          counts.reads++
          if (rows.length !== 1) counts.missing++
        } catch (error) {
          note(readerErrors, error)
          await sleep(5)
        }
      }
    }

    return {
      ledger,
      counts,
      progress,
      /** What the writers and readers met, for assertion messages. */
      errors: () =>
        JSON.stringify({ writerErrors, readerErrors, late: counts.late, firstForeign: foreign[0] }),
      /** An ID of `shard` from the application's source. */
      nextId: (shard: number) => inProcess.nextId(shard),
      writerErrors,
      readerErrors,
      async open(seed: number) {
        homes = await ShardHomes.open({
          sharding,
          servers: Object.fromEntries(homeServers.servers.map((server) => [server.name, server])),
          directory,
          refreshMs: 50,
          switchWaitMs: 2000,
        })
        onTestFinished(() => homes.close())
        if (serverSources) source = new HomesSource({ homes, sources: serverSources })
        for (let index = 0; index < seed; index++) {
          // A loaded machine can make a directory read outlast maxStaleMs: retried, as writers do.
          for (let attempt = 1; ; attempt++) {
            try {
              await insert(index % 64, index % 3 === 0)
              break
            } catch (error) {
              if (!(error instanceof ShardflakeError && error.retryable) || attempt >= 20)
                throw error
              await sleep(20)
            }
          }
        }
      },
      start(writers: number, readers: number) {
        for (let index = 0; index < writers; index++) loops.push(writer())
        for (let index = 0; index < readers; index++) loops.push(reader())
      },
      /** Every post's ID, by a fan-out over every server (old copies dropped). */
      async fanOutIds() {
        const rows = await homes.fanOut(
          async (server) =>
            (await run(server, `SELECT id::text AS id FROM ${tables.posts} ORDER BY id`)) as {
              id: string
            }[],
          { orderBy: (row) => row.id, order: 'asc' },
        )
        return rows.map((row) => row.id)
      },
      async stop() {
        running = false
        await Promise.all(loops)
        inProcess.close()
      },
    }
  }

  /**
   * The end state, read with raw SQL: every acknowledged post (and comment) on its shard's home
   * with its last acknowledged body, every deleted one gone, no row away from its home (old copies
   * on `oldCopiesOn` of the moved shards excepted), no ID on two servers.
   */
  async function checkEndState(
    directory: DirectoryUnderTest,
    tables: { posts: string; comments: string },
    ledger: readonly LedgerPost[],
    oldCopiesOn?: { server: string; shards: readonly number[] },
  ) {
    const { entries } = await directory.read()
    const homeOf = (shard: number) => {
      const entry = entries.find((e: DirectoryEntry) => e.from <= shard && shard <= e.to)!
      expect(entry.state).toBe('serving')
      return entry.server
    }
    const isOldCopy = (server: string, shard: number) =>
      oldCopiesOn !== undefined &&
      server === oldCopiesOn.server &&
      oldCopiesOn.shards.includes(shard)
    const seen = new Map<string, string>()
    const rowsOn = new Map<string, Map<string, string>>()
    for (const server of homeServers.servers) {
      const rows = await run(server, `SELECT id::text AS id, body FROM ${tables.posts}`)
      const mine = new Map<string, string>()
      for (const row of rows as { id: string; body: string }[]) {
        const shard = shardBits(sharding, row.id)
        if (isOldCopy(server.name, shard)) continue
        expect(homeOf(shard), `post ${row.id} of shard ${shard} on ${server.name}`).toBe(
          server.name,
        )
        expect(seen.has(row.id), `post ${row.id} on two servers`).toBe(false)
        seen.set(row.id, server.name)
        mine.set(row.id, row.body)
      }
      rowsOn.set(server.name, mine)
      const comments = await run(server, `SELECT id::text AS id FROM ${tables.comments}`)
      for (const { id } of comments as { id: string }[]) {
        const shard = shardBits(sharding, id)
        if (!isOldCopy(server.name, shard)) expect(homeOf(shard)).toBe(server.name)
      }
    }
    let lost = 0
    let wrongBody = 0
    let resurrected = 0
    for (const post of ledger) {
      const there = rowsOn.get(homeOf(post.shard))!
      if (post.deleted) {
        if (there.has(post.id)) resurrected++
      } else if (!there.has(post.id)) {
        if (!post.unsure) lost++
      } else if (!post.unsure && there.get(post.id) !== post.body) {
        wrongBody++
      }
    }
    expect({ lost, wrongBody, resurrected }).toEqual({ lost: 0, wrongBody: 0, resurrected: 0 })
    // Every acknowledged comment of a live post is at home.
    let lostComments = 0
    for (const post of ledger) {
      if (post.deleted || post.unsure) continue
      const home = homeServers.server(homeOf(post.shard))
      for (const id of post.comments) {
        const rows = await run(
          home,
          `SELECT 1 AS one FROM ${tables.comments} WHERE id = $1::bigint`,
          [id],
        )
        if (rows.length !== 1) lostComments++
      }
    }
    expect(lostComments).toBe(0)
  }

  /** A child process running the mover; its output lines as they come (also into `progress`). */
  function child(env: Record<string, string>, progress?: string[]) {
    const lines: string[] = []
    const proc: ChildProcess = spawn(process.execPath, [options.childScript], {
      env: {
        ...process.env,
        SERVER_URLS: JSON.stringify(homeServers.urls),
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
      progress?.push(...parts)
    })
    proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      errors += chunk
    })
    const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()))
    onTestFinished(() => {
      proc.kill('SIGKILL')
    })
    const waitFor = async (line: string) => {
      // Generous: a child starting under a loaded test run can take minutes to reach a phase.
      const started = Date.now()
      while (!lines.includes(line)) {
        if (proc.exitCode !== null || Date.now() - started > 300_000) {
          throw new Error(`The mover did not print ${line} (exit ${proc.exitCode}):\n${errors}`)
        }
        await sleep(10)
      }
    }
    return { proc, lines, exited, waitFor }
  }

  const statesOf = async (directory: DirectoryUnderTest) => {
    const { entries } = await directory.read()
    return new Set(
      MOVING.map((shard) => {
        const entry = entries.find((e) => e.from <= shard && shard <= e.to)!
        return `${entry.server} ${entry.state}`
      }),
    )
  }

  const countMoving = async (server: string, table: string) => {
    const rows = await run(
      homeServers.server(server),
      `SELECT count(*) AS n FROM ${table} WHERE ((id >> ${sharding.layout.shifts.shard}) & ${2 ** sharding.layout.shardBits - 1}) < 16`,
    )
    return Number(rows[0]!.n)
  }

  /**
   * When a test is still running after `ms`, prints what every server is doing (statements
   * running or waiting, and on what) and what `state()` says of the test, so that a stall can be
   * told from slowness in a log. The test's own timeout still decides.
   */
  function reportIfStalled(ms: number, state: () => unknown) {
    const timer = setTimeout(() => {
      void (async () => {
        const report: Record<string, unknown> = { test: state() }
        for (const server of homeServers.servers) {
          try {
            report[server.name] = await activityOn(server.url)
          } catch (error) {
            report[server.name] = String(error)
          }
        }
        console.log(`[row move ${dialect}] still running after ${ms} ms: ${JSON.stringify(report)}`)
      })()
    }, ms)
    timer.unref()
    onTestFinished(() => clearTimeout(timer))
  }

  async function activityOn(url: string): Promise<unknown[]> {
    if (pg) {
      const client = new pgDriver.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
      client.on('error', () => undefined)
      await client.connect()
      try {
        const { rows } = await client.query(
          `SELECT pid, state, wait_event_type, wait_event, pg_blocking_pids(pid) AS blocked_by,
                  round(extract(epoch FROM now() - query_start) * 1000) AS ms, left(query, 160) AS query
             FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
        )
        return rows
      } finally {
        await client.end().catch(() => undefined)
      }
    }
    const connection = await mysql.createConnection({ uri: url, connectTimeout: 5000 })
    try {
      const [rows] = await connection.query(
        `SELECT id, command, time, state, left(info, 160) AS info FROM information_schema.processlist WHERE id <> connection_id() AND command <> 'Sleep'`,
      )
      return rows as unknown[]
    } finally {
      await connection.end().catch(() => undefined)
    }
  }

  describe(`moving shards with their rows: ${name}`, () => {
    beforeAll(async () => {
      homeServers = await startHomeServers(dialect)
      for (const server of homeServers.servers) {
        const { store, end } = options.openStore(server.url)
        stores[server.name] = store
        ends.push(end)
      }
    }, 300_000)
    afterAll(async () => {
      await Promise.all(ends.map((end) => end()))
      await homeServers?.close()
    }, 60_000)

    it('moves 16 of 64 shards a→c while writers and readers run: nothing lost, misplaced or repeated', async () => {
      const tables = await createTables('live')
      const directory = await openDirectory('dir_live')
      const app = application(directory, tables)
      await app.open(3000)
      app.start(4, 2)
      await sleep(300)
      const phases: string[] = []
      const started = performance.now()
      const result = await moveShardHomes({
        sharding,
        directory,
        servers: stores,
        shards: '0-15',
        to: 'c',
        tables: [tables.posts, tables.comments],
        batchSize: 100,
        deleteOldCopies: true,
        onProgress: ({ phase, table }) => {
          if (phases.at(-1) !== phase) phases.push(phase)
          app.progress.push(`${phase} ${table ?? ''} ${Math.round(performance.now() - started)}`)
        },
      })
      const elapsed = performance.now() - started
      await sleep(300)
      await app.stop()
      expect(phases).toEqual([
        'copying',
        'switching',
        'reconciling',
        'verifying',
        'arriving',
        'serving',
        'deleting',
      ])
      expect(result.from).toBe('a')
      expect(result.resumedFrom).toBe('start')
      expect([...(await statesOf(directory))]).toEqual(['c serving'])
      await checkEndState(directory, tables, app.ledger)
      expect(await countMoving('a', tables.posts)).toBe(0)
      expect(app.counts.missing).toBe(0)
      expect(app.counts.foreign, app.errors()).toBe(0)
      expect(app.counts.inserts).toBeGreaterThan(3000)
      expect(app.counts.updates).toBeGreaterThan(0)
      expect(app.counts.deletes).toBeGreaterThan(0)
      const posts = result.tables[0]!
      // Writes during the copy changed rows the switch had to repair or remove.
      expect(posts.repaired + posts.removed).toBeGreaterThan(0)
      const moved = result.tables.reduce((sum, table) => sum + table.rows, 0)
      console.log(
        `[row move ${dialect}] ${JSON.stringify({
          rowsMoved: moved,
          tables: result.tables,
          rowsPerSecond: Math.round(moved / (elapsed / 1000)),
          moveMs: Math.round(elapsed),
          switchMs: result.switchMs,
          oldCopiesDeleted: result.oldCopiesDeleted,
          writes: app.counts,
          writerErrors: app.writerErrors,
          readerErrors: app.readerErrors,
        })}`,
      )
    }, 300_000)

    it('a mover killed with SIGKILL while switching is resumed by the same call: same end state', async () => {
      const tables = await createTables('resume')
      const directory = await openDirectory('dir_resume')
      const app = application(directory, tables)
      await app.open(1500)
      app.start(2, 1)
      const mover = child(
        {
          DIRECTORY_TABLE: 'dir_resume',
          SHARDS: '0-15',
          TO: 'c',
          TABLES: `${tables.posts},${tables.comments}`,
          BATCH: '100',
          STALL_PHASE: 'reconciling',
        },
        app.progress,
      )
      await mover.waitFor('STALLED')
      mover.proc.kill('SIGKILL')
      await mover.exited
      // Writes to the shards wait, then fail retryably, while the move is stuck.
      await sleep(2500)
      // The directory is the record: the shards are switching on a, writes to them wait.
      expect([...(await statesOf(directory))]).toEqual(['a switching'])
      const result = await moveShardHomes({
        sharding,
        directory,
        servers: stores,
        shards: '0-15',
        to: 'c',
        tables: [tables.posts, tables.comments],
        batchSize: 100,
      })
      expect(result.resumedFrom).toBe('switching')
      await sleep(200)
      await app.stop()
      expect([...(await statesOf(directory))]).toEqual(['c serving'])
      await checkEndState(directory, tables, app.ledger, { server: 'a', shards: MOVING })
      // The old copies stay on a until deleted; the copies on c are complete.
      expect(await countMoving('a', tables.posts)).toBeGreaterThan(0)
      // A fan-out drops the old copies: every post once.
      const ids = await app.fanOutIds()
      expect(new Set(ids).size).toBe(ids.length)
      const total = async (server: string) =>
        Number(
          (await run(homeServers.server(server), `SELECT count(*) AS n FROM ${tables.posts}`))[0]!
            .n,
        )
      const oldCopies = await countMoving('a', tables.posts)
      expect(ids.length).toBe(
        (await total('a')) - oldCopies + (await total('b')) + (await total('c')),
      )
      // Writers went on inserting on c after the flip.
      expect(await countMoving('c', tables.posts)).toBeGreaterThanOrEqual(result.tables[0]!.rows)
      expect(app.counts.missing).toBe(0)
      expect(app.counts.foreign, app.errors()).toBe(0)
      expect(app.writerErrors.SHARD_MOVING ?? 0).toBeGreaterThan(0)
    }, 300_000)

    it('a mover killed with SIGKILL half-way through the copy is aborted: back to serving on a, nothing lost', async () => {
      const tables = await createTables('abort')
      const directory = await openDirectory('dir_abort')
      const app = application(directory, tables)
      await app.open(1500)
      app.start(2, 1)
      const mover = child(
        {
          DIRECTORY_TABLE: 'dir_abort',
          SHARDS: '0-15',
          TO: 'c',
          TABLES: `${tables.posts},${tables.comments}`,
          BATCH: '50',
          STALL_PHASE: 'copying',
          STALL_ROWS: '150',
        },
        app.progress,
      )
      await mover.waitFor('STALLED')
      mover.proc.kill('SIGKILL')
      await mover.exited
      expect([...(await statesOf(directory))]).toEqual(['a serving'])
      expect(await countMoving('c', tables.posts)).toBeGreaterThanOrEqual(150)
      const deleted = await abortShardHomesMove({
        sharding,
        directory,
        servers: stores,
        shards: '0-15',
        from: 'a',
        to: 'c',
        tables: [tables.posts, tables.comments],
      })
      expect(deleted).toBeGreaterThanOrEqual(150)
      await sleep(200)
      await app.stop()
      expect([...(await statesOf(directory))]).toEqual(['a serving'])
      expect(await countMoving('c', tables.posts)).toBe(0)
      expect(await countMoving('c', tables.comments)).toBe(0)
      await checkEndState(directory, tables, app.ledger)
      expect(app.counts.missing).toBe(0)
      expect(app.counts.foreign, app.errors()).toBe(0)
    }, 300_000)

    it('a mover killed while arriving is aborted back through switching to serving on a', async () => {
      const tables = await createTables('back')
      const directory = await openDirectory('dir_back')
      const app = application(directory, tables)
      await app.open(600)
      const mover = child(
        {
          DIRECTORY_TABLE: 'dir_back',
          SHARDS: '0-15',
          TO: 'c',
          TABLES: `${tables.posts},${tables.comments}`,
          BATCH: '100',
          STALL_PHASE: 'arriving',
        },
        app.progress,
      )
      await mover.waitFor('STALLED')
      mover.proc.kill('SIGKILL')
      await mover.exited
      expect([...(await statesOf(directory))]).toEqual(['c arriving'])
      const phases: string[] = []
      await abortShardHomesMove({
        sharding,
        directory,
        servers: stores,
        shards: '0-15',
        from: 'a',
        to: 'c',
        tables: [tables.posts, tables.comments],
        onProgress: ({ phase }) => {
          if (phases.at(-1) !== phase) phases.push(phase)
        },
      })
      expect(phases.slice(0, 2)).toEqual(['switching', 'serving'])
      await app.stop()
      expect([...(await statesOf(directory))]).toEqual(['a serving'])
      expect(await countMoving('c', tables.posts)).toBe(0)
      await checkEndState(directory, tables, app.ledger)
    }, 300_000)

    it('finishes while rows arrive faster than it copies them: the copy does not chase the writers', async () => {
      const tables = await createTables('hot')
      const directory = await openDirectory('dir_hot')
      const app = application(directory, tables)
      await app.open(600)
      const a = homeServers.server('a')
      const base = stores.a!
      let copying = true
      let pageReads = 0
      const arrived: string[] = []
      // Before every page the copy reads, 1.5 pages of new rows arrive on the moving shards.
      const busySource: RowStore = {
        checkTable: (table, signal) => base.checkTable(table, signal),
        async readRows(table, range, signal) {
          if (copying && table.name === tables.posts) {
            if (++pageReads > 300) throw new Error('The copy chased the writers: 300 pages read.')
            const ids = Array.from({ length: 75 }, (_, index) => app.nextId(index % 16).toString())
            const values = ids.map((_, index) => `($${index + 1}::bigint, 'arrived')`).join(', ')
            await run(a, `INSERT INTO ${tables.posts} (id, title) VALUES ${values}`, ids)
            arrived.push(...ids)
          }
          return base.readRows(table, range, signal)
        },
        writeRows: (table, rows, mode, signal) => base.writeRows(table, rows, mode, signal),
        deleteRows: (table, ids, signal) => base.deleteRows(table, ids, signal),
        deleteRange: (table, range, signal) => base.deleteRange(table, range, signal),
      }
      const result = await moveShardHomes({
        sharding,
        directory,
        servers: { ...stores, a: busySource },
        shards: '0-15',
        to: 'c',
        tables: [tables.posts, tables.comments],
        batchSize: 50,
        onProgress: ({ phase }) => {
          if (phase !== 'copying') copying = false
        },
      })
      await app.stop()
      expect([...(await statesOf(directory))]).toEqual(['c serving'])
      // The copy stopped short of the last rows; the switch brought the rest.
      expect(result.tables[0]!.repaired).toBeGreaterThan(0)
      await checkEndState(directory, tables, app.ledger, { server: 'a', shards: MOVING })
      const onC = new Set(
        (
          (await run(homeServers.server('c'), `SELECT id::text AS id FROM ${tables.posts}`)) as {
            id: string
          }[]
        ).map((row) => row.id),
      )
      expect(arrived.filter((id) => !onC.has(id))).toEqual([])
      // Rows arrive faster than they are copied: the second pass, longer than the first, ends the
      // copy (about 10 pages here; four ever longer passes read about 32).
      expect(pageReads).toBeLessThanOrEqual(16)
      expect(await countMoving('c', tables.posts)).toBe(await countMoving('a', tables.posts))
    }, 300_000)

    it("moves IDs drawn on each shard's home with the rows: none twice, drawn on the new home after the flip", async () => {
      const tables = await createTables('ids')
      const directory = await openDirectory('dir_ids')
      const ids = await options.openIdSources(homeServers.urls, sharding, firstMap)
      ends.push(ids.end)
      const app = application(directory, tables, ids.sources)
      await app.open(600)
      app.start(3, 1)
      await sleep(300)
      const idMoves: string[] = []
      await moveShardHomes({
        sharding,
        directory,
        servers: stores,
        shards: '0-15',
        to: 'c',
        tables: [tables.posts, tables.comments],
        batchSize: 100,
        moveIds: async (move) => {
          await ids.moveIds(move)
          idMoves.push(`${move.from}→${move.to}: ${move.shards.length} shards`)
        },
        onProgress: ({ phase, table }) => {
          app.progress.push(`${phase} ${table ?? ''}`)
        },
      })
      // Writers go on until 20 more posts of the moved shards were written on their new home.
      const flippedAt = app.ledger.length
      for (let waited = 0; ; waited += 50) {
        const after = app.ledger.slice(flippedAt).filter((post) => post.shard < 16)
        if (after.length >= 20) break
        if (waited > 120_000) throw new Error(`Only ${after.length} posts after the flip.`)
        await sleep(50)
      }
      await app.stop()
      expect(idMoves).toEqual(['a→c: 16 shards'])
      expect([...(await statesOf(directory))]).toEqual(['c serving'])
      await checkEndState(directory, tables, app.ledger, { server: 'a', shards: MOVING })
      const all = app.ledger.flatMap((post) => [post.id, ...post.comments])
      expect(new Set(all).size).toBe(all.length)
      expect(app.counts.missing).toBe(0)
      expect(app.counts.foreign, app.errors()).toBe(0)
      // The old home refuses the moved shards; the new one draws above every ID it issued.
      await expect(Promise.resolve(ids.sources.a!.nextId(3))).rejects.toBeInstanceOf(
        ShardMovedError,
      )
      const [last] = await run(
        homeServers.server('a'),
        `SELECT id::text AS id FROM ${tables.posts} WHERE ((id >> ${sharding.layout.shifts.shard}) & ${2 ** sharding.layout.shardBits - 1}) = 3 ORDER BY id DESC LIMIT 1`,
      )
      expect(BigInt(await ids.sources.c!.nextId(3))).toBeGreaterThan(BigInt(String(last!.id)))
    }, 300_000)

    it('a target row corrupted during the switch is caught by the checksums: typed error, no flip', async () => {
      const tables = await createTables('corrupt')
      const directory = await openDirectory('dir_corrupt')
      const app = application(directory, tables)
      await app.open(600)
      await app.stop()
      const victim = app.ledger.find((post) => post.shard < 16 && !post.deleted)!
      const attempt = moveShardHomes({
        sharding,
        directory,
        servers: stores,
        shards: '0-15',
        to: 'c',
        tables: [tables.posts, tables.comments],
        batchSize: 100,
        onProgress: async ({ phase, table }) => {
          // The posts are reconciled already: this edit behind the mover's back stays.
          if (phase === 'reconciling' && table === tables.comments) {
            await run(
              homeServers.server('c'),
              `UPDATE ${tables.posts} SET body = 'corrupted' WHERE id = $1::bigint`,
              [victim.id],
            )
          }
        },
      })
      await expect(attempt).rejects.toBeInstanceOf(RowsMismatchError)
      await expect(attempt).rejects.toThrow(new RegExp(`Table ${tables.posts} differs`))
      expect([...(await statesOf(directory))]).toEqual(['a serving'])
      // Run again, the move repairs the row and completes.
      const again = await moveShardHomes({
        sharding,
        directory,
        servers: stores,
        shards: '0-15',
        to: 'c',
        tables: [tables.posts, tables.comments],
      })
      expect(again.tables[0]!.repaired).toBe(1)
      const rows = await run(
        homeServers.server('c'),
        `SELECT body FROM ${tables.posts} WHERE id = $1::bigint`,
        [victim.id],
      )
      expect(rows[0]!.body).toBe(victim.body)
    }, 120_000)

    it('refuses bad input, typed, before anything is written', async () => {
      const tables = await createTables('refuse')
      const directory = await openDirectory('dir_refuse')
      const base = {
        sharding,
        directory,
        servers: stores,
        shards: '0-15',
        to: 'c',
        tables: [tables.posts],
      }
      const version = (await directory.read()).version
      const cases: [object, new (...args: never[]) => Error, RegExp][] = [
        [{ to: 'z' }, ConfigurationError, /to must name one of the servers/],
        [{ to: 'a' }, ConfigurationError, /already serve on server "a"/],
        [{ shards: '15-25' }, ConfigurationError, /not all on one server/],
        [{ tables: ['nope'] }, ConfigurationError, /nope does not exist/],
        [
          { tables: [{ name: tables.posts, idColumn: 'nope' }] },
          ConfigurationError,
          /no column nope/,
        ],
        [{ tables: ['posts"; DROP TABLE x; --'] }, InvalidIdentifierError, /./],
        [{ tables: [] }, InvalidArgumentError, /tables must list/],
        [{ batchSize: 0 }, InvalidArgumentError, /batchSize/],
        [{ shards: '70' }, ShardflakeError, /./],
        [{ servers: { a: stores.a!, c: {} } }, InvalidArgumentError, /row store/],
        [{ from: 'b' }, ConfigurationError, /not on "b"/],
        [{ extra: 1 }, InvalidArgumentError, /extra/],
      ]
      for (const [change, Class, message] of cases) {
        const attempt = moveShardHomes({ ...base, ...change } as Parameters<
          typeof moveShardHomes
        >[0])
        await expect(attempt, JSON.stringify(change)).rejects.toBeInstanceOf(Class)
        await expect(attempt).rejects.toThrow(message)
      }
      expect((await directory.read()).version).toBe(version)
      expect(await countMoving('c', tables.posts)).toBe(0)
    }, 60_000)
  })
}
