import {
  checkCount,
  type IdRequestContext,
  type IdSource,
  throwIfCancelled,
} from '@shardflake/core'

/** Wraps a source, counting calls and IDs; `sharding` and `close()` are the inner source's. */
export class CountingSource implements IdSource {
  nextIdCalls = 0
  nextIdsCalls = 0
  idsIssued = 0

  constructor(private readonly inner: IdSource) {}

  get sharding() {
    return this.inner.sharding
  }

  get synchronous() {
    return this.inner.synchronous
  }

  nextId(shard: number, context?: IdRequestContext) {
    this.nextIdCalls++
    this.idsIssued++
    return this.inner.nextId(shard, context)
  }

  nextIds(shard: number, count: number, context?: IdRequestContext) {
    this.nextIdsCalls++
    this.idsIssued += count
    return this.inner.nextIds(shard, count, context)
  }

  close() {
    return this.inner.close()
  }

  reset(): void {
    this.nextIdCalls = 0
    this.nextIdsCalls = 0
    this.idsIssued = 0
  }
}

/**
 * A synchronous source behind promises, standing in for a database source without a server: it
 * checks the count first and honours an aborted `context.signal` like one; `close()` closes the
 * inner source.
 */
export function asAsync(inner: IdSource): IdSource {
  return {
    sharding: inner.sharding,
    synchronous: false,
    async nextId(shard, context) {
      throwIfCancelled(context?.signal, 'the source')
      return await inner.nextId(shard, context)
    },
    async nextIds(shard, count, context) {
      checkCount(count)
      throwIfCancelled(context?.signal, 'the source')
      return await inner.nextIds(shard, count, context)
    },
    close: () => inner.close(),
  }
}

/**
 * The source with `close()` extended by `end`: what a test opened for it (a pool, databases,
 * keys) is ended or dropped after the source itself is closed.
 */
export function withClose(source: IdSource, end: () => Promise<unknown>): IdSource {
  return {
    sharding: source.sharding,
    synchronous: source.synchronous,
    nextId: (shard, context) => source.nextId(shard, context),
    nextIds: (shard, count, context) => source.nextIds(shard, count, context),
    async close() {
      await source.close()
      await end()
    },
  }
}
