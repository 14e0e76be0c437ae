/** The error `promise` rejects with, or undefined when it resolves. */
export async function settle(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (caught: unknown) => caught,
  )
}
