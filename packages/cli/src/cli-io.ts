/** Where the CLI writes; tests pass their own. */
export interface CliIo {
  stdout: (text: string) => void
  stderr: (text: string) => void
}

/** The process's own stdout and stderr. */
export const processIo: CliIo = {
  stdout: (text) => process.stdout.write(`${text}\n`),
  stderr: (text) => process.stderr.write(`${text}\n`),
}
