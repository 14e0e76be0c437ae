import ts from 'typescript'
import { defineProject, mergeConfig, type Plugin } from 'vitest/config'
import shared from '../../vitest.shared.ts'

/**
 * Test files under `test/es/` use standard (TC39) decorators, which neither oxc (vitest's
 * transform) nor Node 22 can run yet: TypeScript lowers them first. Everything else uses legacy
 * decorators, which oxc lowers because `tsconfig.json` sets `experimentalDecorators`.
 */
const standardDecorators: Plugin = {
  name: 'shardflake:standard-decorators',
  enforce: 'pre',
  transform(code, id) {
    if (!/\/test\/es\/[^?]*\.ts$/.test(id)) return undefined
    const { outputText, sourceMapText } = ts.transpileModule(code, {
      fileName: id,
      compilerOptions: {
        target: ts.ScriptTarget.ES2023,
        module: ts.ModuleKind.ESNext,
        experimentalDecorators: false,
        verbatimModuleSyntax: true,
        sourceMap: true,
      },
    })
    return { code: outputText, map: sourceMapText }
  },
}

export default mergeConfig(
  shared,
  defineProject({ plugins: [standardDecorators], test: { name: 'mikro-orm' } }),
)
