import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import type { Socket } from 'node:net'

/** The client sockets this process connected while {@link watchSockets} watched. */
export interface WatchedSockets {
  /** Every socket connected since the watch began. */
  readonly all: readonly Socket[]
  /** Those not destroyed yet: still open, or half-closed and waiting for the server. */
  open(): Socket[]
  /** Stops watching (the sockets seen so far stay listed). */
  stop(): void
}

/**
 * Watches the client sockets this process connects (Node's `net.client.socket` diagnostics
 * channel), whoever connects them: a test can then show that a source's `close()` left none of
 * its connections open, even half-closed towards a server that stopped answering.
 * @example
 * ```ts
 * const sockets = watchSockets()
 * onTestFinished(() => sockets.stop())
 * // ... use and close a source
 * expect(sockets.open()).toEqual([])
 * ```
 */
export function watchSockets(): WatchedSockets {
  const all: Socket[] = []
  const onSocket = (message: unknown) => {
    const socket = (message as { socket?: Socket } | undefined)?.socket
    if (socket) all.push(socket)
  }
  subscribe('net.client.socket', onSocket)
  return {
    all,
    open: () => all.filter((socket) => !socket.destroyed),
    stop: () => unsubscribe('net.client.socket', onSocket),
  }
}
