import { createConnection } from 'node:net'

/**
 * Sends one command to a Redis server over a fresh connection and returns the reply (simple
 * strings and bulk strings as text, integers as numbers, nil as null). Enough for probes and
 * checks; use a client library for anything else.
 */
export async function redisCommand(
  port: number,
  command: readonly string[],
  timeoutMs = 2_000,
): Promise<string | number | null> {
  return await new Promise((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    let buffer = ''
    const fail = (error: Error) => {
      socket.destroy()
      reject(error)
    }
    socket.setTimeout(timeoutMs, () => fail(new Error(`Redis on port ${port} did not answer.`)))
    socket.once('error', fail)
    socket.on('data', (data) => {
      buffer += data.toString('utf8')
      const end = buffer.indexOf('\r\n')
      if (end < 0) return
      const head = buffer.slice(0, end)
      const kind = head[0]
      const rest = head.slice(1)
      let reply: string | number | null
      if (kind === '+') reply = rest
      else if (kind === ':') reply = Number(rest)
      else if (kind === '-') return fail(new Error(`Redis: ${rest}`))
      else if (kind === '$') {
        const length = Number(rest)
        if (length < 0) reply = null
        else {
          const body = Buffer.from(buffer.slice(end + 2), 'utf8')
          if (body.length < length + 2) return
          reply = body.subarray(0, length).toString('utf8')
        }
      } else return fail(new Error(`Redis: unexpected reply ${JSON.stringify(head)}`))
      socket.end()
      resolve(reply)
    })
    socket.write(
      `*${command.length}\r\n${command.map((part) => `$${Buffer.byteLength(part)}\r\n${part}\r\n`).join('')}`,
    )
  })
}
