import type { IdRequestContext, IdSource } from '@shardflake/core'

/**
 * Any source seen through an asynchronous interface (a promise per call), as a database source
 * is: exercises the `onFlush` path of the subscriber on the real databases.
 */
export class AsyncSource implements IdSource {
  readonly synchronous = false

  constructor(private readonly inner: IdSource) {}

  get layout() {
    return this.inner.layout
  }

  get logicalShards() {
    return this.inner.logicalShards
  }

  async nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    return await this.inner.nextId(shard, context)
  }

  async nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    return await this.inner.nextIds(shard, count, context)
  }
}
