import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Fixed ingest statements live in sql/ingest/<file>.sql, one or more statements per file separated by
 * `-- name: <name>` markers, so they can be read as SQL rather than as strings inside TypeScript.
 */
const SQL_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../sql/ingest');
const cache = new Map<string, Map<string, string>>();

export function ingestSql(file: string, name: string): string {
  let stmts = cache.get(file);
  if (!stmts) {
    stmts = new Map();
    const text = fs.readFileSync(path.join(SQL_DIR, `${file}.sql`), 'utf8');
    for (const part of text.split(/^-- name: /m).slice(1)) {
      const nl = part.indexOf('\n');
      stmts.set(
        part.slice(0, nl).trim(),
        part
          .slice(nl + 1)
          .trim()
          .replace(/;\s*$/, ''),
      );
    }
    cache.set(file, stmts);
  }
  const sql = stmts.get(name);
  if (sql === undefined) throw new Error(`no statement ${name} in sql/ingest/${file}.sql`);
  return sql;
}
