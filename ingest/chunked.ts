import fs from 'node:fs';
import { makeScratchDir } from './scratch.js';
import type { TapeBatchContext } from './ws/common.js';
import { chunkBytes, splitLines } from './ws/json.js';

/**
 * Stages a JSON lines file of records that stand alone (a fill per line) in chunks cut at line ends, as the tape's
 * files are (ingest/ws/json.ts): a file above the orchestrator's chunk size is never read whole, and the batch may
 * be written out between two chunks (the file enters the ledger with its last chunk; a crash before re-stages it
 * whole, which the merges' natural keys de-duplicate). What a chunk reports is told of the file: the issues that
 * name the chunk name the file instead, their lines counted from the file's start.
 */
export async function stageLineChunks(ctx: TapeBatchContext, file: string, stagePart: (part: string) => Promise<void>): Promise<void> {
  const bytes = chunkBytes(ctx);
  if (!/\.(jsonl|ndjson)$/i.test(file) || fs.statSync(file).size <= bytes) {
    await stagePart(file);
    return;
  }
  const dir = makeScratchDir(ctx.lakeDir, 'chunks');
  try {
    for (const chunk of splitLines(file, dir, bytes)) {
      const before = ctx.issues.length;
      await stagePart(chunk.path);
      for (let i = before; i < ctx.issues.length; i += 1) {
        const issue = ctx.issues[i]!;
        if (issue.file !== chunk.path) continue;
        ctx.issues[i] = { ...issue, file, ...(issue.line !== undefined ? { line: issue.line + chunk.firstLine - 1 } : {}) };
      }
      fs.rmSync(chunk.path, { force: true });
      if (ctx.maybeFlush) await ctx.maybeFlush();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
