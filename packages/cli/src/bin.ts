#!/usr/bin/env node
import { errorLine, runCli } from './program'

// A failure that escapes the command (a driver's late error) still ends in one line, never a
// stack trace.
for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(event, (error: unknown) => {
    process.stderr.write(`${errorLine(error)}\n`)
    process.exit(1)
  })
}

process.exitCode = await runCli(process.argv.slice(2))
