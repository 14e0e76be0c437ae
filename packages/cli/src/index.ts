export type { CliIo } from './cli-io'
export { addLayoutOptions, type LayoutFlags, readLayout } from './layout-options'
export { createProgram, runCli } from './program'
