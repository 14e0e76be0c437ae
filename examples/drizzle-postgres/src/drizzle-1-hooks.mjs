// Module hooks for drizzle-1.ts: `drizzle-orm` and `drizzle-orm/...` become `drizzle-orm-1/...`,
// resolved from this example, so every importer gets the same install.
const example = new URL('../package.json', import.meta.url).href

export async function resolve(specifier, context, next) {
  const match = /^drizzle-orm(\/.*)?$/.exec(specifier)
  if (!match) return next(specifier, context)
  return next(`drizzle-orm-1${match[1] ?? ''}`, { ...context, parentURL: example })
}
