import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { SimulatedCatalogue, type SimulatedCatalogueOptions } from '../../sim/simulate/catalogue.js';
import { SimulatedVenue, type SimHttpRoute } from '../../sim/simulate/venue.js';

export type Sent = { path: string; status: number; body: string };

/** The simulated venue serving `catalogue`'s pages, remembering every answer's body as sent on the wire. */
export async function catalogueVenue(
  opts: SimulatedCatalogueOptions,
): Promise<{ venue: SimulatedVenue; catalogue: SimulatedCatalogue; sent: Sent[]; gammaUrl: string; clobUrl: string }> {
  const catalogue = new SimulatedCatalogue(opts);
  const sent: Sent[] = [];
  const recording: SimHttpRoute = async (req, res, url) => {
    const end = res.end.bind(res) as (chunk: string) => http.ServerResponse;
    (res as { end: (chunk: string) => unknown }).end = (chunk: string) => {
      sent.push({ path: `${url.pathname}${url.search}`, status: res.statusCode, body: chunk });
      return end(chunk);
    };
    for (const r of catalogue.routes) if (await r(req, res, url)) return true;
    return false;
  };
  const venue = await SimulatedVenue.start({ markets: [], rate: 0, routes: [recording] });
  return { venue, catalogue, sent, gammaUrl: `${venue.httpUrl}/gamma`, clobUrl: `${venue.httpUrl}/clob` };
}

export type PollLine = {
  kind: 'catalogue_poll' | 'page' | 'error' | 'end';
  endpoint?: 'gamma_markets' | 'gamma_events' | 'clob_markets';
  url?: string;
  status?: number | null;
  body?: string;
  message?: string;
  complete?: Record<string, boolean>;
  pages?: number;
  [k: string]: unknown;
};

/** Every line of a poll file, each parsed (a line that is not JSON fails the test); the text ends with `\n`. */
export function readPoll(file: string): PollLine[] {
  const text = fs.readFileSync(file, 'utf8');
  if (!text.endsWith('\n')) throw new Error(`${file} does not end with a newline`);
  return text
    .slice(0, -1)
    .split('\n')
    .map((l) => JSON.parse(l) as PollLine);
}

export const CLOSED_POLL = /^catalogue-\d{8}T\d{6}Z-(.+)\.jsonl$/;

export const closedPolls = (dir: string): string[] =>
  fs
    .readdirSync(dir)
    .filter((n) => CLOSED_POLL.test(n))
    .sort()
    .map((n) => path.join(dir, n));

export const openPolls = (dir: string): string[] => fs.readdirSync(dir).filter((n) => n.startsWith('.open-'));

type J = Record<string, unknown>;

/** The records of one endpoint's page bodies in a poll, read with JSON.parse (Gamma: `markets`/`events`; CLOB: `data`). */
export function recordsOf(lines: PollLine[], endpoint: string): J[] {
  return lines
    .filter((l) => l.kind === 'page' && l.endpoint === endpoint)
    .flatMap((l) => {
      const v = JSON.parse(l.body!) as { markets?: J[]; events?: J[]; data?: J[] };
      const records = v.markets ?? v.events ?? v.data;
      if (!records) throw new Error(`a page of ${endpoint} without records: ${l.body!.slice(0, 80)}`);
      return records;
    });
}

/** The condition id each record names (Gamma markets, events' nested markets, CLOB markets). */
export function conditionIds(records: J[]): string[] {
  return records.flatMap((r) => (Array.isArray(r.markets) ? (r.markets as J[]).map((m) => String(m.conditionId)) : [String(r.conditionId ?? r.condition_id)]));
}

export const sortedCopy = (xs: readonly string[]): string[] => [...xs].sort();
