import type { Response } from 'express';

/** Sends a JSON array DuckDB already serialised (a lake session's jsonArray / jsonRows) and records the row count for the log. */
export function sendJsonText(res: Response, out: { json: string; rows: number }): undefined {
  res.locals.rows = out.rows;
  res.type('application/json').send(out.json);
  return undefined;
}
