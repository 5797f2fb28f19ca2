/**
 * Writes the archive span's golden files (test/fixtures/golden/archive-span/) from today's code: ingests the
 * fixture archive hour into a fresh lake, starts the real server on a loopback port and stores every answer
 * test/ingest/archive-golden.test.ts compares (test/helpers/golden-archive.ts lists them).
 *
 *   node --import tsx scripts/golden-archive.ts             # the golden files
 *   node --import tsx scripts/golden-archive.ts --fixture   # first rewrite the fixture hour itself
 *
 * Run it only on code whose answers are the reference: the test's purpose is to notice when they change.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FIXTURE, fetchGoldenAnswers, GOLDEN_DIR, goldenServer, writeFixture, writeGolden } from '../test/helpers/golden-archive.js';

async function main(): Promise<void> {
  if (process.argv.includes('--fixture')) {
    const n = await writeFixture(FIXTURE);
    process.stdout.write(`${FIXTURE}: ${n} rows, ${fs.statSync(FIXTURE).size} bytes\n`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-golden-'));
  try {
    const g = await goldenServer(dir);
    try {
      const a = await fetchGoldenAnswers(g);
      writeGolden(a);
      for (const e of a.entries) process.stdout.write(`${e.status} ${String(e.bytes).padStart(9)} ${e.file}\n`);
      process.stdout.write(`${a.entries.length} answers in ${GOLDEN_DIR}\n`);
    } finally {
      await g.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
