import { expect, it } from 'vitest'
import type { AdapterSuiteState } from './suite-state'

/** Concurrent insert loops (`s.concurrency` of them) never share an ID. */
export function testConcurrentInserts(s: AdapterSuiteState): void {
  it(`never repeats an ID across ${s.concurrency} concurrent insert loops`, async () => {
    const perLoop = 25
    await Promise.all(
      Array.from({ length: s.concurrency }, async (_, loop) => {
        for (let i = 0; i < perLoop; i++) {
          if (i % 5 === 4) {
            await s.blog.createPosts(
              [0, 1, 2].map((k) => ({
                authorId: s.ormId(s.authors[(loop + k) % s.authors.length]!),
                title: `loop ${loop}`,
              })),
            )
          } else {
            await s.blog.createPost({
              authorId: s.ormId(s.authors[loop % s.authors.length]!),
              title: `loop ${loop}`,
            })
          }
        }
      }),
    )
    const expected = s.concurrency * (perLoop - perLoop / 5 + (perLoop / 5) * 3)
    const [stats] = await s.rows(
      `SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM posts WHERE title LIKE 'loop %'`,
    )
    expect(Number(stats?.n)).toBe(expected)
    expect(Number(stats?.d)).toBe(expected)
  })
}
