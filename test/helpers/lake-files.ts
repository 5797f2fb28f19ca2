import { currentFiles, SET_NAMES, setDir } from '../../src/lake/versions.js';

/**
 * The current lake version's files of a data set, by its directory (`trades`, `catalog/markets`), as a SQL list
 * for the tests' own `read_parquet`: a partition may hold several files and retired files stay on disk for the
 * grace period, so a directory glob is not the lake (src/lake/versions.ts).
 */
export function files(lakeDir: string, dir: string): string {
  const name = SET_NAMES.find((n) => setDir(n) === dir);
  if (!name) throw new Error(`no data set in ${dir}`);
  return `[${currentFiles(lakeDir, name)
    .map((f) => `'${f}'`)
    .join(', ')}]`;
}
