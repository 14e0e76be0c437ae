// Lets `node` run this package's TypeScript sources as they are (the generator during
// `prisma generate` in the tests): relative imports without an extension resolve to `.ts`, or
// to `index.ts` for a folder.
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
