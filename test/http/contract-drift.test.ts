import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { routes } from '../../src/http/routes.js';
import { buildOpenApi } from '../../src/http/openapi.js';
import { contractDrift, type Drift } from '../helpers/openapi-drift.js';

/**
 * pmlake's /v1/openapi.json against the anchor's document, compared the way the anchor SDK's drift checker
 * compares (test/helpers/openapi-drift.ts). Every difference left must be one of the deliberate ones below;
 * every rule must still match something, so the list states exactly where pmlake differs and why.
 */
type Rule = { match: RegExp; why: string };

const ts = '(start|end|ending_after|ending_before)';
const ALLOWED: Rule[] = [
  { match: /^~ API version$/, why: "pmlake's own document version (1.0.0); the anchor's is 1.1.0" },

  // pmlake-only routes.
  { match: /^\+ operation GET \/charts(\/charts\.js|\/lightweight-charts\.js)?$/, why: 'the charts page and its scripts (issue 16)' },
  { match: /^\+ operation GET \/docs$/, why: 'the rendered API documentation' },
  { match: /^\+ operation GET \/v1\/openapi\.json$/, why: 'the document itself is a route of the table' },
  {
    match: /^\+ operation (GET|POST) \/v1\/billing\/checkout\/local\/\{checkout_id\}(\/cancel|\/confirm)?$/,
    why: 'the local payment provider checkout (no external provider offline)',
  },
  { match: /^\+ operation POST \/v1\/billing\/webhook\/local$/, why: "the local payment provider's webhook" },
  { match: /^\+ operation GET \/v1\/exports\/\{job_id\}\/file$/, why: 'the signed-link target of an export stored locally (no S3 configured)' },
  {
    match: /^\+ operation GET \/v1\/orderbook\/(snapshot|top_of_book)$/,
    why: 'the spec: order books at any instant and top of book (the anchor has only downloads)',
  },

  // Response-code sets: the anchor's FastAPI document lists only 200/422; pmlake also documents the 401 (no or
  // bad key), 404 (unknown market or series) and 429 (rate limit, fair use) it really answers.
  { match: /^~ (GET|POST|DELETE) \S+ response codes$/, why: 'pmlake documents its 401/403/404/429 answers too' },

  // Parameters.
  { match: new RegExp(`^~ \\S+ \\S+ parameter query ${ts}$`), why: 'timestamps capped at 64 characters (stricter bound; same date-time format)' },
  {
    match: /^~ \S+ \S+ parameter (query|path) (market_id|series_id|job_id|data_type|instrument_prefix|category|search|symbol|resolution|query|sort_by)$/,
    why: 'length bounds on free-text ids and filters (stricter bound), or a closed set written as enum where the anchor writes a pattern',
  },
  { match: /^~ \S+ \S+ parameter query (format|shape)$/, why: 'the same closed set, written as enum (zod) where the anchor writes a pattern' },
  { match: /^~ \S+ \S+ parameter query timeframe$/, why: "the spec wins: any timeframe (e.g. 7m, 30s), not only the anchor's list" },
  {
    match: /^~ \S+ \S+ parameter query (active|closed|resolved|has_data)$/,
    why: 'booleans also accepted as 0/1 and case variants; the document lists the accepted spellings',
  },
  { match: /^~ GET \/v1\/trades parameter query side$/, why: 'buy/sell lower case as the spec names them' },
  {
    match: /^~ \S+ \/v1\/user\/keys\/\{key_id\}(\/rotate)? parameter path key_id$/,
    why: "pmlake key ids are short opaque ids (the spec), not the anchor's UUIDs",
  },
  { match: /^~ GET \/v1\/user\/usage parameter query (start_date|end_date)$/, why: 'same date format; zod states its pattern' },
  {
    match: /^~ GET \/v1\/charts\/(udf\/history|replay\/ticks) parameter query (from|to|countback)$/,
    why: 'epoch seconds bounded to years 1–9999 (stricter bound)',
  },
  { match: /^\+ GET \/v1\/download\/raw parameter query market_id$/, why: 'extra: a raw pull narrowed to one market' },
  { match: /^\+ GET \/v1\/download\/series parameter query timeframe$/, why: 'extra: series OHLCV at any timeframe' },

  // Schemas only pmlake has (responses of pmlake-only or unnamed anchor responses, the error body).
  {
    match: /^\+ schema (ErrorDetail|MarketStatsResponse|OrderBookSnapshot|ReplayTicksResponse|RootResponse|StatusResponse|TopOfBookRow|UdfConfig)$/,
    why: 'named response schemas the anchor leaves inline or lacks',
  },
  { match: /^- ValidationError\.ctx$/, why: "pmlake's 422 items carry loc/msg/type/input, no pydantic ctx" },

  // Request bodies: the anchor's names, pmlake's stricter or wider fields.
  {
    match: new RegExp(`^~ (CreateExportRequest|EstimateRequest|MarketEstimateRequest|OrderItemRequest|BulkDownloadItem)\\.${ts}$`),
    why: 'timestamps capped at 64 characters',
  },
  {
    match: /^~ (CreateExportRequest|CreateOrderRequest|BulkDownloadItem)\.(idempotency_key|market_id|series_id|data_type|instrument_prefix)$/,
    why: 'non-empty, bounded ids (stricter bound)',
  },
  { match: /^\+ CreateExportRequest\.(shape|timeframe)$/, why: 'extra: normalized raw exports and OHLCV exports at any timeframe' },
  { match: /^~ (CreateExportRequest|BulkDownloadItem)\.kind$/, why: 'extra: OHLCV and order-book exports, top-of-book bulk items' },
  { match: /^~ (EstimateRequest|MarketEstimateRequest|OrderItemRequest|BulkDownloadItem)\.timeframe$/, why: 'the spec wins: any timeframe' },
  {
    match: /^~ (EstimateRequest|MarketEstimateRequest)\.data_type$/,
    why: "the spec's data sets (top_of_book, raw); options greeks/snapshots are sized by their series route",
  },
  { match: /^~ OrderItemRequest\.(market_id|series_id)$/, why: 'numeric market ids / series id characters (the spec refuses 0x ids)' },
  { match: /^~ (CreateCheckoutRequest|SubCheckoutRequest)\.(success_url|cancel_url)$/, why: 'return URLs must be URLs of at most 2000 characters (stricter)' },
  { match: /^~ (SubCheckoutRequest|RedeemRequest)\.(tier|billing_period)$/, why: 'the closed sets of plans and periods pmlake sells' },
  { match: /^~ CreateKeyRequest\.(notify_email|scopes)$/, why: 'no default notification (no mail offline); 1–2 scopes' },
  { match: /^~ ProvisionKeyRequest\.email$/, why: 'at least 3 characters' },
  {
    match: /^~ DeleteAccountRequest(\.reason| definition)$/,
    why: 'strict body, reason ≤ 2000 characters (a body without the field must not open a deletion unnoticed)',
  },
  { match: /^~ DeleteConfirmRequest\.token$/, why: 'non-empty, bounded token' },

  // Response schemas: pmlake always sends every field (so all are required and none needs a default), some
  // fields are closed sets, and it adds fields (clients ignore unknown ones).
  { match: /^~ \w+Response(Summary)? required$|^~ PublicMarket(Summary)? required$/, why: 'every field always sent' },
  {
    match: /^~ (\w+Response|PublicMarket|PublicMarketSummary)\.\w+$/,
    why: 'field schemas: no defaults (always sent), closed sets, stricter types; date-time formats still to add',
  },
  { match: /^\+ (\w+Response)\.\w+$/, why: 'extra response fields (condition_id, series_id, status, idempotency_key, …)' },
];

const anchor = JSON.parse(readFileSync('/work/shared/reference/anchor-openapi.json', 'utf8'));

describe("the contract against the anchor's OpenAPI document", () => {
  it('differs only where the allow-list says why', () => {
    const drift = contractDrift(anchor, buildOpenApi(routes));
    const used = new Set<Rule>();
    const unexplained: Drift[] = [];
    for (const d of drift) {
      const rule = ALLOWED.find((r) => r.match.test(d.key));
      if (rule) used.add(rule);
      else unexplained.push(d);
    }
    expect(unexplained.map((d) => d.text)).toEqual([]);
    // A rule that no longer matches anything is stale: remove it.
    expect(ALLOWED.filter((r) => !used.has(r)).map((r) => r.match.source)).toEqual([]);
  });

  it('every anchor operation is described, and every anchor request body is the same named schema', () => {
    const drift = contractDrift(anchor, buildOpenApi(routes)).map((d) => d.key);
    expect(drift.filter((k) => k.startsWith('- operation'))).toEqual([]);
    expect(drift.filter((k) => k.endsWith(' requestBody'))).toEqual([]);
    expect(drift.filter((k) => k.startsWith('- schema'))).toEqual([]);
  });

  it('the comparison itself sees a change (it is not vacuous)', () => {
    const doc = buildOpenApi(routes) as any;
    const changed = structuredClone(doc);
    delete changed.paths['/v1/trades'].get;
    changed.paths['/v1/exports'].post.requestBody.content['application/json'].schema = { type: 'object' };
    changed.components.schemas.TradeResponse.properties.price = { type: 'string' };
    const keys = contractDrift(doc, changed).map((d) => d.key);
    expect(keys).toEqual(['- operation GET /v1/trades', '~ POST /v1/exports requestBody', '~ TradeResponse.price']);
    expect(contractDrift(doc, structuredClone(doc))).toEqual([]);
  });
});
