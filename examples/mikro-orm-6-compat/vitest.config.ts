import { realpathSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { defineProject, mergeConfig } from 'vitest/config'
import shared from '../../vitest.shared.ts'

/**
 * `@shardflake/mikro-orm` is a workspace link, so its own imports of `@mikro-orm/core` would
 * resolve to the MikroORM 7 installed for its development. An application installing it from
 * the registry resolves that peer to the application's MikroORM 6: this alias does the same
 * here, so the package's code, the drivers and the tests share one MikroORM 6.
 */
const mikroOrm6 = realpathSync(
  dirname(createRequire(import.meta.url).resolve('@mikro-orm/core/package.json')),
)

export default mergeConfig(
  shared,
  defineProject({
    resolve: { alias: [{ find: /^@mikro-orm\/core$/, replacement: mikroOrm6 }] },
    test: { name: 'mikro-orm-6-compat' },
  }),
)
