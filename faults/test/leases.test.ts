import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import {
  startMariadb,
  startPostgres,
  startRedis,
  type ThrowawayServer,
} from '@shardflake/conformance'
import { afterAll, expect, inject, test } from 'vitest'
import { type Holder, Holders, LEASE_SHARDS, type LeaseRegistryTarget } from '../src/leases'
import { Scenario, sleep } from '../src/scenario'

const run = promisify(execFile)
const servers: ThrowawayServer[] = []

afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()))
})

/** The longest TTL, and the registries' maxTtlMs: how long a registry waits after losing data. */
const LONG_TTL_MS = 10_000
const SHORT_TTL_MS = 500

/**
 * Three holders with the long TTL, then three with the short one, each holding a lease: the long
 * ones hold the lowest workers, which the short ones take first when the registry forgot them.
 */
async function startHolders(holders: Holders): Promise<{ long: Holder[]; short: Holder[] }> {
  const long = [0, 1, 2].map(() => holders.spawn(LONG_TTL_MS))
  await Promise.all(long.map((holder) => holder.leased()))
  const short = [0, 1, 2].map(() => holders.spawn(SHORT_TTL_MS))
  await Promise.all(short.map((holder) => holder.leased()))
  return { long, short }
}

/** kill -9 of each short-TTL holder in turn, a new one in its place: grants the registry records. */
async function killStorm(holders: Holders, short: Holder[]): Promise<void> {
  for (let i = 1; i < short.length; i++) {
    short[i] = await holders.replace(short[i]!)
    await sleep(700)
  }
}

/** Every ledger got IDs again after the loss (once the registry's wait was over). */
function expectIdsAfterTheLoss(scenario: Scenario) {
  for (const ledger of scenario.ledgers) {
    for (const window of ledger.figures().windows) {
      expect(window.ids, `${ledger.source} during "${window.name}"`).toBeGreaterThan(0)
    }
  }
}

test('leased holders (TTLs 10 s and 0.5 s, one of each paused) while their Redis registry is killed -9 and restarts empty', async () => {
  const server = await startRedis({ name: 'lease-registry' })
  servers.push(server)
  const scenario = new Scenario('leases: Redis registry restarted empty')
  const target: LeaseRegistryTarget = {
    kind: 'redis',
    url: server.url,
    maxTtlMs: LONG_TTL_MS,
    shards: LEASE_SHARDS.redis,
  }
  const holders = new Holders(scenario, target)
  // A new Redis registry cannot tell it is new: the first grants come after maxTtlMs.
  const { long, short } = await startHolders(holders)
  await sleep(2_000)
  await killStorm(holders, short)
  const paused = [long[0]!, short[0]!]
  for (const holder of paused) holder.pause()
  scenario.faults.add('SIGSTOP of a holder across the restart', paused.length)
  // No persistence: every lease, token and mark is gone when it comes back.
  await scenario.crash([server], 500)
  for (const ledger of scenario.ledgers) ledger.openWindow('after the registry restarted empty')
  await sleep(1_500)
  long[0]!.resume() // it issues again up to its mark, while the short-TTL holders ask for workers
  await sleep(1_500)
  short[0]!.resume()
  await sleep(LONG_TTL_MS + 2_000)
  for (const ledger of scenario.ledgers) ledger.closeWindow()
  await holders.stopAll()
  await scenario.finish(inject('runDir'))
  expectIdsAfterTheLoss(scenario)
  // The registry forgot every lease: each paused holder took a new one after the wait.
  for (const holder of paused) {
    expect(holder.leases.length, `${holder.name}: leases taken`).toBeGreaterThanOrEqual(2)
  }
})

/** A SQL registry's copy taken, and restored over it: PostgreSQL or MariaDB. */
interface Dumps {
  readonly kind: 'postgres' | 'mysql'
  start(): Promise<ThrowawayServer>
  dump(server: ThrowawayServer, file: string): Promise<unknown>
  restore(server: ThrowawayServer, file: string): Promise<unknown>
  /** How the fault is named in the figures. */
  readonly restored: string
}

const SQL_REGISTRIES: readonly Dumps[] = [
  {
    kind: 'postgres',
    start: () => startPostgres({ name: 'lease-registry', durable: true }),
    dump: (server, file) =>
      run('pg_dump', ['--format=custom', '--schema=shardflake', `--file=${file}`, server.url]),
    restore: (server, file) =>
      run('pg_restore', ['--clean', '--if-exists', `--dbname=${server.url}`, file]),
    restored: 'registry restored from the dump (pg_restore --clean)',
  },
  {
    kind: 'mysql',
    start: () => startMariadb({ name: 'lease-registry', durable: true }),
    dump: (server, file) =>
      run('mariadb-dump', [
        '-h127.0.0.1',
        `-P${server.port}`,
        '-uroot',
        '--databases',
        'shardflake',
        `--result-file=${file}`,
      ]),
    restore: (server, file) =>
      run('mariadb', ['-h127.0.0.1', `-P${server.port}`, '-uroot', '-e', `source ${file}`]),
    restored: 'registry restored from the dump (mariadb-dump, then mariadb)',
  },
]

for (const registry of SQL_REGISTRIES) {
  const name = registry.kind === 'postgres' ? 'PostgreSQL' : 'MariaDB'
  test(`leased holders (TTLs 10 s and 0.5 s, one of each paused) while their ${name} registry is restored from an older dump`, async () => {
    const server = await registry.start()
    servers.push(server)
    const scenario = new Scenario(`leases: ${name} registry restored from an older dump`)
    const target: LeaseRegistryTarget = {
      kind: registry.kind,
      url: server.url,
      maxTtlMs: LONG_TTL_MS,
      shards: LEASE_SHARDS[registry.kind],
    }
    const holders = new Holders(scenario, target)
    const { long, short } = await startHolders(holders)
    await sleep(2_000)
    const dump = join(server.directory, 'registry.dump')
    await registry.dump(server, dump)
    scenario.faults.add('dump of the registry')
    // Grants and renewals the dump does not have: among them a holder with the long TTL.
    await sleep(1_000)
    long[1] = await holders.replace(long[1]!)
    await long[1].leased()
    await killStorm(holders, short)
    const paused = [long[1], short[0]!]
    for (const holder of paused) holder.pause()
    scenario.faults.add('SIGSTOP of a holder across the restore', paused.length)
    await registry.restore(server, dump)
    scenario.faults.add(registry.restored)
    for (const ledger of scenario.ledgers) ledger.openWindow('after the registry was restored')
    await sleep(1_500)
    for (const holder of paused) holder.resume()
    await sleep(LONG_TTL_MS + 3_000)
    for (const ledger of scenario.ledgers) ledger.closeWindow()
    await holders.stopAll()
    await scenario.finish(inject('runDir'))
    expectIdsAfterTheLoss(scenario)
  })
}
