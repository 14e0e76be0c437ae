export { addLayoutOptions, type LayoutFlags, readLayout } from './layout-options'
export { type CliIo, createProgram, runCli } from './program'
