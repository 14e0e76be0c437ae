import { helper, Utils } from '@mikro-orm/core'

/**
 * The keys `em.create()` gave out, by entity, so that a flush can tell them from keys the caller
 * set. An entity's key is kept on its MikroORM helper (`wrap(entity, true)`, which users do not
 * see, compare or serialize) under a symbol of this instance; plain data (`em.upsert(Entity,
 * data)`) goes to a WeakMap. A WeakMap entry for every entity cost more than the rest of
 * `onCreate`: a WeakMap holding thousands of live entities, as a flush of 1000 does, took about
 * 0.6-1 µs per entry to fill, and the garbage collector walks it again on every pass.
 */
export class IssuedKeys {
  readonly #mark = Symbol('shardflake: key given at em.create()')
  readonly #plain = new WeakMap<object, unknown>()

  /** Records `id` as the key given to `entity`. */
  set(entity: object, id: unknown): void {
    if (Utils.isEntity(entity, true)) Reflect.set(helper(entity), this.#mark, id)
    else this.#plain.set(entity, id)
  }

  /** The key given to `entity`, or `undefined`. */
  get(entity: object): unknown {
    return Utils.isEntity(entity, true)
      ? Reflect.get(helper(entity), this.#mark)
      : this.#plain.get(entity)
  }
}
