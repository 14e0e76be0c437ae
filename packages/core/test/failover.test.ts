import { describe, expect, it } from 'vitest'
import { ConfigurationError, Failover, SourceUnavailableError, TimedOutError } from '../src/index'

interface TestServer {
  name: string
  downUntil: number
}
const servers = (): TestServer[] => ['a', 'b', 'c'].map((name) => ({ name, downUntil: 0 }))

describe('Failover', () => {
  it('orders healthy servers first, rotating with round-robin, and skips a failed one for retryAfterMs', () => {
    let now = 1000
    const list = servers()
    const rotating = new Failover(list, {
      retryAfterMs: 50,
      strategy: 'round-robin',
      skipped: 'last',
      now: () => now,
    })
    const names = () => rotating.order().map((s) => s.name)
    expect(names()).toEqual(['a', 'b', 'c'])
    expect(names()).toEqual(['b', 'c', 'a'])
    rotating.markDown(list[2]!)
    expect(names()).toEqual(['a', 'b', 'c'])
    expect(names()).toEqual(['a', 'b', 'c'])
    now = 1050
    expect(names()).toEqual(['b', 'c', 'a'])
    const fixed = new Failover(list, {
      retryAfterMs: 50,
      strategy: 'failover',
      skipped: 'when-none-healthy',
      ready: (s) => s.name !== 'a',
      now: () => now,
    })
    expect(fixed.order().map((s) => s.name)).toEqual(['b', 'c'])
    for (const s of list) fixed.markDown(s)
    expect(fixed.order().map((s) => s.name)).toEqual(['a', 'b', 'c'])
  })

  it('asks the next server after a failure that fails over, throws one that does not, and reports all failing', async () => {
    const failover = new Failover(servers(), {
      retryAfterMs: 1000,
      strategy: 'failover',
      skipped: 'last',
    })
    const handlers = {
      translate: (error: unknown) => error as TimedOutError,
      failsOver: (error: { code: string }) => error.code === 'TIMED_OUT',
      unavailable: (failures: readonly [TestServer, unknown][]) =>
        new SourceUnavailableError(failures.map(([s]) => s.name).join(','), {
          cause: failures.at(-1)?.[1],
        }),
    }
    const asked: string[] = []
    const answer = await failover.run(async (server) => {
      asked.push(server.name)
      if (server.name === 'a') throw new TimedOutError('a hung')
      return server.name
    }, handlers)
    expect([answer, asked]).toEqual(['b', ['a', 'b']])
    expect(failover.order().map((s) => s.name)).toEqual(['b', 'c', 'a'])
    await expect(
      failover.run(async () => {
        throw new ConfigurationError('bad')
      }, handlers),
    ).rejects.toBeInstanceOf(ConfigurationError)
    const all = failover.run(async (server) => {
      throw new TimedOutError(server.name)
    }, handlers)
    await expect(all).rejects.toThrow(SourceUnavailableError)
    await expect(all).rejects.toThrow('b,c,a')
  })
})
