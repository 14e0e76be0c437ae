/**
 * `node --import ./src/hooks.ts`: lets Node run the workspace's test helpers as they are
 * (`@shardflake/conformance` starts the throwaway servers): a relative import without an
 * extension resolves to its `.ts` file, or to a folder's `index.ts`.
 */
import { registerHooks } from 'node:module'

registerHooks({
  resolve(specifier, context, next) {
    try {
      return next(specifier, context)
    } catch (error) {
      if (!specifier.startsWith('.') || /\.[cm]?[jt]s$/.test(specifier)) throw error
      try {
        return next(`${specifier}.ts`, context)
      } catch {
        return next(`${specifier}/index.ts`, context)
      }
    }
  },
})
