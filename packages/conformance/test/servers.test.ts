import { existsSync } from 'node:fs'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { freePort, redisCommand, runTag, startMariadb, startPostgres, startRedis } from '../src'

/** Runs `sql` on a connection of its own and returns the rows. */
async function pgQuery(url: string, sql: string) {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(sql)).rows
  } finally {
    await client.end()
  }
}

describe('throwaway servers', () => {
  it('runTag is one tag per process, safe in identifiers', () => {
    expect(runTag()).toBe(runTag())
    expect(runTag()).toMatch(/^\d+_[0-9a-f]{6}$/)
    expect(runTag(true)).not.toBe(runTag())
  })

  it('freePort returns a port nothing listens on', async () => {
    const port = await freePort()
    expect(port).toBeGreaterThan(0)
    await expect(redisCommand(port, ['PING'], 500)).rejects.toThrow()
  })

  it('PostgreSQL: starts, answers, survives SIGKILL with restart(), stops and leaves nothing', async () => {
    const server = await startPostgres()
    onTestFinished(() => server.stop())
    const query = (sql: string) => pgQuery(server.url, sql)
    expect(server.url).toContain(`:${server.port}/`)
    expect(server.port).not.toBe(5432)
    await query('CREATE TABLE kept (n int)')
    await query('INSERT INTO kept VALUES (42)')
    await server.kill('SIGKILL')
    expect(server.running).toBe(false)
    await expect(query('SELECT 1')).rejects.toThrow()
    await server.restart()
    expect(await query('SELECT n FROM kept')).toEqual([{ n: 42 }])
    await server.stop()
    expect(server.running).toBe(false)
    expect(existsSync(server.directory)).toBe(false)
    await expect(query('SELECT 1')).rejects.toThrow()
  })

  it('PostgreSQL: SIGSTOP pauses open connections too (their backends leave the group), SIGCONT resumes them', async () => {
    const server = await startPostgres()
    onTestFinished(() => server.stop())
    const client = new pg.Client({ connectionString: server.url })
    await client.connect()
    onTestFinished(() => client.end())
    expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }])
    await server.kill('SIGSTOP')
    const answered = client.query('SELECT 2 AS two').then((result) => result.rows)
    const first = await Promise.race([
      answered,
      new Promise((resolve) => setTimeout(() => resolve('no answer'), 500)),
    ])
    expect(first).toBe('no answer')
    await server.kill('SIGCONT')
    expect(await answered).toEqual([{ two: 2 }])
  })

  it('PostgreSQL, durable: fsync on, named, keeps committed rows over an immediate restart', async () => {
    const server = await startPostgres({ name: 'durable-pg', durable: true, maxConnections: 50 })
    onTestFinished(() => server.stop())
    const query = (sql: string) => pgQuery(server.url, sql)
    expect(server.name).toBe('durable-pg')
    expect(await query('SHOW fsync')).toEqual([{ fsync: 'on' }])
    expect(await query('SHOW max_connections')).toEqual([{ max_connections: '50' }])
    await query('CREATE TABLE kept (n int)')
    await query('INSERT INTO kept VALUES (1)')
    await server.restart('immediate')
    expect(await query('SELECT n FROM kept')).toEqual([{ n: 1 }])
    await server.restart('fast')
    expect(await query('SELECT n FROM kept')).toEqual([{ n: 1 }])
  })

  it('MariaDB: starts, answers, survives SIGKILL with restart(), restarts, stops', async () => {
    const server = await startMariadb()
    onTestFinished(() => server.stop())
    const query = async (sql: string) => {
      const connection = await mysql.createConnection({ uri: server.url })
      try {
        const [rows] = await connection.query(sql)
        return rows
      } finally {
        await connection.end()
      }
    }
    expect(server.port).not.toBe(3306)
    await query('CREATE TABLE kept (n INT)')
    await query('INSERT INTO kept VALUES (7)')
    await server.kill('SIGKILL')
    await expect(query('SELECT 1')).rejects.toThrow()
    await server.restart()
    expect(await query('SELECT n FROM kept')).toEqual([{ n: 7 }])
    await server.restart()
    expect(await query('SELECT n FROM kept')).toEqual([{ n: 7 }])
    await server.stop()
    expect(existsSync(server.directory)).toBe(false)
    await expect(query('SELECT 1')).rejects.toThrow()
  })

  it('Redis: starts, answers, pauses with SIGSTOP, stops', async () => {
    const server = await startRedis()
    onTestFinished(() => server.stop())
    expect(server.port).not.toBe(6379)
    expect(await redisCommand(server.port, ['SET', 'k', 'v'])).toBe('OK')
    expect(await redisCommand(server.port, ['GET', 'k'])).toBe('v')
    await server.kill('SIGSTOP')
    await expect(redisCommand(server.port, ['PING'], 300)).rejects.toThrow('did not answer')
    await server.kill('SIGCONT')
    expect(await redisCommand(server.port, ['PING'])).toBe('PONG')
    await server.stop()
    await expect(redisCommand(server.port, ['PING'], 500)).rejects.toThrow()
  })
})
