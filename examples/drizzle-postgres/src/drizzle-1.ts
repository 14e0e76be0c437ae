/**
 * `node --import ./src/drizzle-1.ts src/bench.ts`: runs the example on Drizzle 1.0. Every
 * `drizzle-orm` import, the example's and `@shardflake/drizzle`'s, resolves to the `drizzle-orm-1`
 * install (1.0.0-rc), as in an application that has only 1.0.
 */
import { register } from 'node:module'

register(new URL('./drizzle-1-hooks.mjs', import.meta.url))
