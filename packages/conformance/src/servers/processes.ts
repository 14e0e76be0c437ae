/**
 * The processes of throwaway servers: every one this test process starts is killed, with the
 * processes it started, when this process exits (a run that dies half-way leaves none behind).
 */
import { type ChildProcess, execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

const live = new Set<ChildProcess>()

process.once('exit', () => {
  for (const child of live) signalGroup(child, 'SIGKILL')
})

/**
 * Keeps `child` (a server started detached, leading its own process group) until it exits, to
 * kill it if this process exits first. Resolves when it exits or could not start.
 */
export function track(child: ChildProcess): Promise<void> {
  live.add(child)
  return new Promise<void>((resolve) => {
    const gone = () => {
      live.delete(child)
      resolve()
    }
    child.once('exit', gone)
    child.once('error', gone)
  })
}

/**
 * Sends `signal` to `child` and every process it started, if it runs: its process group, and
 * its descendants that left the group (PostgreSQL's backends each start a session of their own, so
 * a SIGSTOP of the group alone would leave every open connection answering).
 */
export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  const descendants = descendantsOf(child.pid)
  try {
    process.kill(-child.pid, signal)
  } catch {
    child.kill(signal)
  }
  for (const pid of descendants) {
    try {
      process.kill(pid, signal)
    } catch {}
  }
}

/** The processes below `pid` (Linux `/proc`); none where that cannot be read. */
function descendantsOf(pid: number): number[] {
  const found: number[] = []
  const walk = (parent: number) => {
    let children: string
    try {
      children = readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8')
    } catch {
      return
    }
    for (const child of children.split(' ').filter(Boolean).map(Number)) {
      found.push(child)
      walk(child)
    }
  }
  walk(pid)
  return found
}

/**
 * Sends `signal` to `child`'s process group and to every process below it that left the group:
 * PostgreSQL's backends each lead a group of their own (setsid), so pausing the postmaster's
 * group alone would leave open connections answering.
 */
export function signalTree(child: ChildProcess, signal: NodeJS.Signals): void {
  signalGroup(child, signal)
  if (child.pid === undefined) return
  for (const pid of descendants(child.pid)) {
    try {
      process.kill(pid, signal)
    } catch {} // it exited meanwhile
  }
}

/** The processes below `pid` (children, their children, ...), from `pgrep -P`. */
function descendants(pid: number): number[] {
  let children: number[]
  try {
    children = execFileSync('pgrep', ['-P', String(pid)])
      .toString()
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map(Number)
  } catch {
    return [] // pgrep exits with 1 when there are none
  }
  return children.flatMap((child) => [child, ...descendants(child)])
}

/**
 * The uid and gid of `user`, when this process runs as root; else undefined (run as ourselves).
 * Database servers refuse to run as root.
 */
export function identity(user: string | undefined): { uid: number; gid: number } | undefined {
  if (!user || process.getuid?.() !== 0) return undefined
  const uid = Number(execFileSync('id', ['-u', user]).toString().trim())
  const gid = Number(execFileSync('id', ['-g', user]).toString().trim())
  return { uid, gid }
}
