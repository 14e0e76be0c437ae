import { onTestFinished } from 'vitest'
import { defineSharding, InProcessSource, type InProcessSourceOptions, instagram } from '../src'

/** The sharding of most core tests: Instagram's layout over 2000 logical shards, as in the article. */
export const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })

/**
 * An in-process source (of {@link sharding} unless given) that is closed when the test ends, so
 * its shard claims do not reach the next test.
 */
export function openSource(
  options: Omit<InProcessSourceOptions, 'sharding'> & Partial<InProcessSourceOptions>,
): InProcessSource {
  const source = new InProcessSource({ sharding, ...options })
  onTestFinished(() => source.close())
  return source
}

/** A clock that moves only when told to; sleeping advances it. */
export function fakeClock(startMs: number) {
  const clock = { now: startMs, slept: 0, reads: 0 }
  return {
    clock,
    options: {
      clock: () => {
        clock.reads++
        return clock.now
      },
      sleep: (ms: number) => {
        clock.now += ms
        clock.slept += ms
      },
    },
  }
}
