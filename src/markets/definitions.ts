import { NotFound } from '../errors.js';
import { MAX_ISO_MICROS, MIN_ISO_MICROS, parseIsoMicros } from '../iso-time.js';
import type { LakeSession } from '../lake/session.js';
import { isoFromMicros, type Json, type Row } from '../lake/values.js';
import {
  DEFINITION_FIELDS,
  DEFINITION_SOURCES,
  definitionChangesQuery,
  definitionsAtQuery,
  firstDefinitionQuery,
  type ChangesWindow,
  type DefinitionField,
  type DefinitionSource,
} from '../query/market-definitions.js';

/**
 * A market's definition as it stood at an instant, and its changes over time, from the catalogue polls' point-in-time
 * rows (src/query/market-definitions.ts). Never the current catalogue passed off as history: an instant before the
 * first recorded definition, or a market never polled, is a 404 saying so.
 */

export type PointInTime = {
  /** Gamma over CLOB, field by field: a field one source leaves NULL is taken from the other. */
  fields: Record<DefinitionField, Json>;
  /** When the merged definition came into force: the latest valid_from of the rows merged. */
  validFrom: string;
};

function neverPolled(marketId: string): NotFound {
  return new NotFound(`market ${marketId} has no recorded definition history: the catalogue poller never recorded it`);
}

export async function definitionAt(lake: LakeSession, marketId: string, conditionId: string | null, asOf: bigint): Promise<PointInTime> {
  if (conditionId === null) throw neverPolled(marketId);
  const rows = await lake.rows(definitionsAtQuery(lake.sources, conditionId, asOf));
  if (rows.length === 0) {
    const first = (await lake.one(firstDefinitionQuery(lake.sources, conditionId)))?.first ?? null;
    if (first === null) throw neverPolled(marketId);
    throw new NotFound(`market ${marketId} has no recorded definition at ${isoFromMicros(asOf)}: its first recorded definition is from ${String(first)}`);
  }
  const bySource = DEFINITION_SOURCES.flatMap((s) => rows.filter((r) => r.source === s));
  const fields = {} as Record<DefinitionField, Json>;
  for (const f of DEFINITION_FIELDS) fields[f] = bySource.map((r) => r[f] ?? null).find((v) => v !== null) ?? null;
  const validFrom = rows.map((r) => microsOf(String(r.valid_from))).reduce((a, b) => (a > b ? a : b));
  return { fields, validFrom: isoFromMicros(validFrom) };
}

export type FieldChange = { from: Json; to: Json };
export type DefinitionChange = { at: string; source: string; changes: Partial<Record<DefinitionField, FieldChange>> };

/** The fields whose value differs between two rows of one source; a source's first row: every field it sets, from null. */
export function diffDefinitions(prev: Row | null, cur: Row): Partial<Record<DefinitionField, FieldChange>> {
  const out: Partial<Record<DefinitionField, FieldChange>> = {};
  for (const f of DEFINITION_FIELDS) {
    const from = prev ? (prev[f] ?? null) : null;
    const to = cur[f] ?? null;
    if (JSON.stringify(from) !== JSON.stringify(to)) out[f] = { from, to };
  }
  return out;
}

export type ChangesPage = { changes: DefinitionChange[]; next: { at: bigint; source: string } | null };

/** One page of a market's definition changes, oldest first; `next` is where the following page starts. */
export async function definitionChanges(lake: LakeSession, marketId: string, conditionId: string | null, w: ChangesWindow): Promise<ChangesPage> {
  if (conditionId === null) throw neverPolled(marketId);
  // One row more than the page says whether the list goes on.
  const rows = await lake.rows(definitionChangesQuery(lake.sources, conditionId, { ...w, limit: w.limit + 1 }));
  if (rows.length === 0 && w.after === undefined) {
    const first = (await lake.one(firstDefinitionQuery(lake.sources, conditionId)))?.first ?? null;
    if (first === null) throw neverPolled(marketId);
  }
  const shown = rows.slice(0, w.limit);
  const changes: DefinitionChange[] = [];
  for (const r of shown) {
    const diff = diffDefinitions((r.prev as Row | null) ?? null, r.cur as Row);
    if (Object.keys(diff).length > 0) changes.push({ at: String(r.at), source: String(r.source), changes: diff });
  }
  const last = shown[shown.length - 1];
  const next = rows.length > w.limit && last ? { at: microsOf(String(last.at)), source: String(last.source) } : null;
  return { changes, next };
}

/** An instant as the runner writes it (ISO 8601 with Z) in µs. */
function microsOf(iso: string): bigint {
  const us = parseIsoMicros(iso);
  if (us === null) throw new Error(`not an ISO instant: ${iso}`);
  return us;
}

/** The page cursor as opaque text: the last row's instant (µs) and source. */
export function encodeChangesCursor(c: { at: bigint; source: string }): string {
  return Buffer.from(`${c.at}:${c.source}`, 'utf8').toString('base64url');
}

/** The longest cursor encodeChangesCursor writes (the widest instant and source) fits in this many characters. */
export const MAX_CHANGES_CURSOR = 48;

/**
 * A cursor this endpoint could have written, or null: base64url of `<µs>:<source>` with the instant within years
 * 0000–9999 (what the rows' valid_from can be, and what DuckDB binds as a timestamp) and a known source. Anything
 * else is refused before a statement sees it, and so is a second spelling of a valid cursor (padding, leading
 * zeros, base64's unused bits): the text must be what encodeChangesCursor gives for the value it decodes to.
 */
export function decodeChangesCursor(text: string): { at: bigint; source: DefinitionSource } | null {
  if (text.length > MAX_CHANGES_CURSOR || !/^[A-Za-z0-9_-]+$/.test(text)) return null;
  const m = /^(-?\d{1,18}):([a-z]{1,16})$/.exec(Buffer.from(text, 'base64url').toString('utf8'));
  if (!m) return null;
  const at = BigInt(m[1]!);
  const source = DEFINITION_SOURCES.find((s) => s === m[2]);
  if (source === undefined || at < MIN_ISO_MICROS || at > MAX_ISO_MICROS) return null;
  return encodeChangesCursor({ at, source }) === text ? { at, source } : null;
}
