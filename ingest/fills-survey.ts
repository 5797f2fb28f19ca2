import type { DuckDBConnection } from '@duckdb/node-api';
import { sampleLines, scaleToFile } from './line-sample.js';
import type { InputSurvey } from './types.js';

/**
 * `--dry-run` survey of decoded OrderFilled events as JSON lines (ingest/fills.ts): the span of their block times,
 * the trades they would stage (fills whose taker is not an exchange contract, whose fill is the match's echo)
 * counted in a sample of the lines and scaled by bytes. Other layouts (a JSON array, a subgraph answer, CSV) tell
 * only their format.
 */
export async function surveyFills(_conn: DuckDBConnection, file: string, exchanges: readonly string[]): Promise<InputSurvey> {
  const none: InputSurvey = { from: null, to: null, rows: null, estimated: false };
  if (!/\.(jsonl|ndjson)(\.gz)?$/i.test(file)) return none;
  const sample = await sampleLines(file);
  const echo = new Set(exchanges.map((e) => e.toLowerCase()));
  let min = Infinity;
  let max = -Infinity;
  const counted = sample.windows.map((w) => {
    let fills = 0;
    for (const line of w) {
      let e: Record<string, unknown>;
      try {
        e = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      const name = e.event ?? e.event_name ?? e.eventName;
      if (name !== undefined && name !== 'OrderFilled') continue;
      // Block times are epoch seconds; a value past 1e12 is already milliseconds.
      const t = Number(e.block_timestamp ?? e.timestamp ?? e.blockTimestamp ?? e.block_time);
      if (Number.isFinite(t)) {
        const ms = t > 1e12 ? t : t * 1000;
        min = Math.min(min, ms);
        max = Math.max(max, ms);
      }
      if (!echo.has(String(e.taker ?? '').toLowerCase())) fills += 1;
    }
    return fills;
  });
  const rows = scaleToFile(sample, counted);
  if (rows === null) return none;
  const known = Number.isFinite(min);
  return { from: known ? new Date(min).toISOString() : null, to: known ? new Date(max).toISOString() : null, rows, estimated: true };
}
