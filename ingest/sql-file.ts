import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { DuckDBConnection } from '@duckdb/node-api';

/** Fixed statements of one sql/ingest/*.sql file, comment lines removed, split on statement ends. */
const cache = new Map<string, string[]>();
export function sqlStatements(name: string): string[] {
  let stmts = cache.get(name);
  if (!stmts) {
    const text = fs.readFileSync(fileURLToPath(new URL(`../sql/ingest/${name}`, import.meta.url)), 'utf8');
    stmts = text
      .split('\n')
      .filter((l) => !l.trimStart().startsWith('--'))
      .join('\n')
      .split(/;\s*$/m)
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
    cache.set(name, stmts);
  }
  return stmts;
}

export async function runSqlFile(conn: DuckDBConnection, name: string): Promise<void> {
  const profile = process.env.PMLAKE_PROFILE === '1';
  for (const s of sqlStatements(name)) {
    const t = performance.now();
    await conn.run(s);
    if (profile) process.stderr.write(`[profile] ${name} ${(performance.now() - t).toFixed(0)} ms: ${s.slice(0, 60).replace(/\s+/g, ' ')}\n`);
  }
}
