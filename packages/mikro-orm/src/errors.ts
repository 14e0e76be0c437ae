import { InvalidArgumentError, type ShardflakeErrorOptions } from '@shardflake/core'

/**
 * An entity got its ID at `em.create()`, then its shard key or parent changed so that its rule
 * now places it on another shard, and another entity of the flush already references it: the
 * ID cannot be replaced. Nothing was written. Set the key (or parent) before `em.create()`, or
 * create the entity with `new` + `em.persist()` so its ID is made at flush.
 * (`code` is `INVALID_ARGUMENT`.)
 */
export class ShardKeyChangedError extends InvalidArgumentError {
  constructor(message: string, options?: ShardflakeErrorOptions) {
    super(message, options)
    this.name = 'ShardKeyChangedError'
  }
}
