import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';

/**
 * Independent reading of the tape fixtures in plain TypeScript (JSON.parse, a tiny CSV reader and a Map
 * book), written without looking at the ingest code's SQL. Tests compare the lake with what this computes.
 */

export type Msg = Record<string, unknown> & { event_type?: string };

/** The JSON elements of a capture, in file order: one per line of JSON lines, else the document's array (or itself). */
export function jsonElements(file: string): unknown[] {
  const text = fs.readFileSync(file, 'utf8');
  if (/\.(jsonl|ndjson)$/.test(file)) {
    return text
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as unknown);
  }
  const doc = JSON.parse(text) as unknown;
  return Array.isArray(doc) ? doc : [doc];
}

/** Frames (each a list of messages) of a fixture, in file order. */
export function framesOf(file: string): Msg[][] {
  return jsonElements(file).map((el) => {
    if (Array.isArray(el)) return el as Msg[];
    const o = el as Record<string, unknown>;
    if (o.message && o.timestamp) return [o.message as Msg];
    if (o.GET_book) return [{ event_type: 'book', ...(o.GET_book as Msg) }];
    if (!o.event_type && (o.bids || o.asks)) return [{ ...o, event_type: 'book' }];
    return [o as Msg];
  });
}

/** RFC 4180 CSV (quotes doubled inside quoted fields), header row first. */
export function parseCsv(text: string): Record<string, string>[] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let q = false;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i]!;
    if (q) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (ch === '"') q = false;
      else field += ch;
    } else if (ch === '"') q = true;
    else if (ch === ',') {
      row.push(field);
      field = '';
    } else if (ch === '\n' || ch === '\r') {
      if (ch === '\r' && text[i + 1] === '\n') i += 1;
      row.push(field);
      field = '';
      if (row.length > 1 || row[0] !== '') rows.push(row);
      row = [];
    } else field += ch;
  }
  if (field !== '' || row.length) {
    row.push(field);
    rows.push(row);
  }
  const [head, ...body] = rows;
  return body.map((r) => Object.fromEntries(head!.map((h, i) => [h, r[i] ?? ''])));
}

/** The DB-export CSV as old-shape price_change messages in id (arrival) order. */
export function csvMessages(file: string): Msg[] {
  return parseCsv(fs.readFileSync(file, 'utf8'))
    .sort((a, b) => Number(a.id) - Number(b.id))
    .map((r) => ({
      event_type: 'price_change',
      asset_id: r.asset_id,
      market: r.market,
      hash: r.hash,
      timestamp: String(Date.parse(r.timestamp!.replace(' ', 'T').replace(/ ([+-]\d\d)(\d\d)$/, '$1:$2'))),
      changes: JSON.parse(r.changes!) as unknown,
    }));
}

/** Canonical decimal text (what DuckDB prints for DECIMAL(10,6)/(18,6)), e.g. "0.5" → "0.500000". */
export function d6(x: string | number): string {
  const s = String(x);
  const [i, f = ''] = s.split('.');
  return `${i}.${f.padEnd(6, '0')}`;
}

export type Book = { bids: Map<string, string>; asks: Map<string, string> };
type Level = { price: string; size: string };

/** Book of every token after applying messages in order (book replaces, price_change sets new totals). */
export function replay(messages: Msg[]): Map<string, Book> {
  const books = new Map<string, Book>();
  for (const m of messages) apply(books, m);
  return books;
}

/** Applies one message to the books in place. */
export function apply(books: Map<string, Book>, m: Msg): void {
  const get = (id: string): Book => {
    let b = books.get(id);
    if (!b) books.set(id, (b = { bids: new Map(), asks: new Map() }));
    return b;
  };
  const set = (side: Map<string, string>, price: string, size: string): void => {
    if (Number(size) === 0) side.delete(d6(price));
    else side.set(d6(price), d6(size));
  };
  {
    if (m.event_type === 'book') {
      const b = get(m.asset_id as string);
      b.bids.clear();
      b.asks.clear();
      for (const l of (m.bids as Level[]) ?? []) set(b.bids, l.price, l.size);
      for (const l of (m.asks as Level[]) ?? []) set(b.asks, l.price, l.size);
    } else if (m.event_type === 'price_change') {
      const entries =
        (m.price_changes as (Level & { side: string; asset_id: string })[] | undefined) ??
        ((m.changes as (Level & { side: string })[]) ?? []).map((c) => ({ ...c, asset_id: m.asset_id as string }));
      for (const c of entries) {
        const b = get(c.asset_id);
        set(c.side === 'BUY' ? b.bids : b.asks, c.price, c.size);
      }
    }
  }
}

/** Levels best first: bids by price descending, asks ascending. */
export function sorted(side: Map<string, string>, descending: boolean): { price: string; size: string }[] {
  return [...side.entries()]
    .map(([price, size]) => ({ price, size }))
    .sort((a, b) => (descending ? Number(b.price) - Number(a.price) : Number(a.price) - Number(b.price)));
}

/** Rows of a query over the lake's Parquet, as JSON-safe objects (decimals as text). */
export async function lakeRows(sql: string): Promise<Record<string, unknown>[]> {
  const db = await DuckDBInstance.create(':memory:');
  const c = await db.connect();
  try {
    await c.run(`SET TimeZone = 'UTC'`);
    return (await c.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
  } finally {
    c.closeSync();
    db.closeSync();
  }
}

/** A fresh temporary directory (same as test/helpers/server.ts, without loading the HTTP server). */
export function tempDir(prefix = 'pmlake-test-'): { dir: string; cleanup(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}
