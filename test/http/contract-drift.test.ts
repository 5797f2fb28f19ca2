import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { routes } from '../../src/http/routes.js';
import { buildOpenApi } from '../../src/http/openapi.js';
import { canon, contractDrift, type Drift } from '../helpers/openapi-drift.js';

/**
 * pmlake's /v1/openapi.json against the anchor's document, compared the way the anchor SDK's drift checker
 * compares (test/helpers/openapi-drift.ts). Every difference left must be one of the deliberate ones below;
 * every rule must still match something, so the list states exactly where pmlake differs and why.
 *
 * A rule allows a difference when its key matches and, where given, `check` accepts the exact change (the
 * anchor's value `before`, pmlake's `after`): so "a stricter bound" cannot silently cover a changed type.
 */
type Rule = { match: RegExp; why: string; check?: (d: Drift) => boolean };

/** `v` without the given keywords, at any depth (inside anyOf, items, …). */
function without(v: unknown, keys: readonly string[]): unknown {
  if (Array.isArray(v)) return v.map((x) => without(x, keys));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).flatMap(([k, x]) => (keys.includes(k) ? [] : [[k, without(x, keys)]])));
  return v;
}
/** The two schemas differ only in these keywords (bounds, a closed set, a format): the same contract, narrowed. */
const adds =
  (...keys: string[]) =>
  (d: Drift): boolean =>
    canon(without(d.after, keys)) === canon(without(d.before, keys));
/** pmlake's closed set holds every value of the anchor's, and more. */
const widerSet = (d: Drift): boolean => {
  const a = (d.before as { enum?: string[] }).enum ?? [];
  const b = (d.after as { enum?: string[] }).enum ?? [];
  return a.every((x) => b.includes(x)) && b.length > a.length && canon(without(d.after, ['enum'])) === canon(without(d.before, ['enum']));
};
/** The anchor's `X | null` where pmlake always sends an X (the spec types the field, no null). */
const neverNull = (d: Drift): boolean => canon(d.before) === canon({ anyOf: [d.after, { type: 'null' }] });
/** Every field the anchor requires, pmlake requires too (it always sends every field it documents). */
const requiresMore = (d: Drift): boolean => (d.before as string[]).every((f) => (d.after as string[]).includes(f));
/** The anchor's response codes plus only these answers pmlake really gives (and documents). */
const codesPlus =
  (...extra: string[]) =>
  (d: Drift): boolean => {
    const a = d.before as string[];
    const b = d.after as string[];
    return a.every((c) => b.includes(c)) && b.every((c) => a.includes(c) || extra.includes(c));
  };

const ALLOWED: Rule[] = [
  { match: /^~ API version$/, why: 'the spec wins: "The machine-readable description carries version 1.0.0" (the anchor is at 1.1.0)' },

  // Routes only pmlake has.
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
  { match: /^\+ operation GET \/v1\/(coverage|markets\/\{market_id\}\/coverage)$/, why: 'tape coverage and incidents (issue 15)' },
  { match: /^\+ operation GET \/v1\/markets\/\{market_id\}\/changes$/, why: 'point-in-time market definitions: their changes (issue 25)' },
  { match: /^\+ operation GET \/v1\/replay\/normalized$/, why: 'the normalized and computed streams as NDJSON (issue 26)' },
  {
    match: /^\+ operation GET \/v1\/download\/(book_snapshot_interval|tbbo)$/,
    why: 'the computed file kinds: books at an interval, trades with the quote before each (issue 26)',
  },
  {
    match: /^\+ (CreateExportRequest|BulkDownloadItem|MarketEstimateRequest)\.(interval|depth)$/,
    why: 'extra: the interval and depth of book_snapshot_interval pulls (issue 26)',
  },
  { match: /^\+ GET \/v1\/markets\/\{market_id\} parameter query as_of$/, why: 'extra: the market as it stood at an instant (issue 25)' },

  // Response codes: the anchor's FastAPI document lists only 200/422; pmlake also documents the answers it
  // really gives: 401 (no or bad key), 403 (an API key on a bearer-only route), 404 (unknown market or
  // series), 429 (rate limit, fair use) — and nothing of the anchor's is missing.
  { match: /^~ (GET|POST|DELETE) \S+ response codes$/, why: 'documents its 401/403/404/429 answers too', check: codesPlus('401', '403', '404', '429') },
  {
    match: /^~ POST \/v1\/user\/keys response codes$/,
    why: 'the spec wins: POST /v1/user/keys answers "status 201; the new key"',
    check: (d) => canon(d.after) === canon(['201', '401', '422', '429']),
  },

  // Parameters: the anchor's schema with a bound added (same type, format, closed set).
  {
    match: /^~ \S+ \S+ parameter query (start|end|ending_after|ending_before)$/,
    why: 'date-times capped at 64 characters (stricter: no unbounded text is parsed or echoed)',
    check: adds('maxLength'),
  },
  {
    match: /^~ \S+ \S+ parameter (query|path) (market_id|series_id|job_id|data_type|instrument_prefix|category|search|sort_by|symbol|resolution|query)$/,
    why: 'free-text ids and filters bounded in length (stricter bound)',
    check: adds('minLength', 'maxLength'),
  },
  {
    match: /^~ GET \/v1\/charts\/(udf\/history|replay\/ticks) parameter query (from|to|countback)$/,
    why: 'epoch seconds bounded to years 1–9999, countback ≥ 1 (stricter bound)',
    check: adds('minimum', 'maximum'),
  },
  {
    match: /^~ GET \/v1\/(trades\/ohlcv|download\/ohlcv) parameter query timeframe$/,
    why: "the spec wins: any timeframe (e.g. 7m, 30s), not only the anchor's list",
  },
  {
    match: /^~ GET \/v1\/trades(\/ohlcv)? parameter query outcome$/,
    why: 'one outcome rule on every endpoint: any outcome the market has (a market may list more than two; one it lacks is a 422 naming outcome)',
    check: adds('maximum'),
  },
  { match: /^~ GET \/v1\/trades parameter query side$/, why: 'the spec wins: side is "buy or sell" (lower case), not also BUY/SELL' },
  {
    match: /^~ \S+ \/v1\/user\/keys\/\{key_id\}(\/rotate)? parameter path key_id$/,
    why: "pmlake key ids are short opaque ids, not the anchor's UUIDs",
  },
  { match: /^\+ GET \/v1\/download\/raw parameter query market_id$/, why: 'extra: a raw pull narrowed to one market' },
  {
    match: /^\+ GET \/v1\/download\/raw\/estimate parameter query (market_id|shape)$/,
    why: "the estimate takes the download's selectors (one market, the flat shape) and sizes exactly that download",
  },
  { match: /^\+ GET \/v1\/download\/series parameter query timeframe$/, why: 'extra: series OHLCV at any timeframe' },

  // Named schemas only pmlake has: responses the anchor leaves inline or lacks, the error body.
  {
    match:
      /^\+ schema (ErrorDetail|MarketStatsResponse|OrderBookSnapshot|ReplayTicksResponse|RootResponse|MarketDefinitionChange|StatusResponse|TopOfBookRow|UdfConfig|MarketCoverageResponse|VenueCoverageResponse|PullCoverage)$/,
    why: 'named response schemas the anchor leaves inline or lacks',
  },
  { match: /^- ValidationError\.ctx$/, why: "pmlake's 422 items carry loc/msg/type/input, no pydantic ctx" },

  // Request bodies: the anchor's named schemas; where a field differs, pmlake's is bounded or wider.
  {
    match: /^~ (CreateExportRequest|EstimateRequest|MarketEstimateRequest|OrderItemRequest|BulkDownloadItem)\.(start|end)$/,
    why: 'date-times capped at 64 characters (stricter bound)',
    check: adds('maxLength'),
  },
  {
    match: /^~ (CreateExportRequest|CreateOrderRequest|BulkDownloadItem)\.(idempotency_key|market_id|series_id|data_type|instrument_prefix)$/,
    why: 'non-empty, bounded ids (stricter bound)',
    check: adds('minLength', 'maxLength'),
  },
  {
    match: /^~ (DeleteAccountRequest\.reason|DeleteConfirmRequest\.token|ProvisionKeyRequest\.email)$/,
    why: 'bounded text (stricter bound)',
    check: adds('minLength', 'maxLength'),
  },
  { match: /^~ CreateKeyRequest\.scopes$/, why: '1–2 scopes (stricter bound)', check: adds('minItems', 'maxItems') },
  {
    match: /^~ (CreateCheckoutRequest|SubCheckoutRequest)\.(success_url|cancel_url)$/,
    why: 'return URLs must be URLs of at most 2000 characters',
    check: adds('format', 'maxLength'),
  },
  { match: /^~ (SubCheckoutRequest|RedeemRequest)\.(tier|billing_period)$/, why: 'the closed sets of plans and periods pmlake sells', check: adds('enum') },
  { match: /^~ (CreateExportRequest|BulkDownloadItem)\.kind$/, why: 'extra: OHLCV and order-book exports, top-of-book bulk items', check: widerSet },
  { match: /^~ (EstimateRequest|MarketEstimateRequest)\.data_type$/, why: "extra: the spec's data sets top_of_book and raw", check: widerSet },
  { match: /^\+ CreateExportRequest\.(shape|timeframe)$/, why: 'extra: normalized raw exports and OHLCV exports at any timeframe' },
  {
    match: /^~ (EstimateRequest|MarketEstimateRequest|OrderItemRequest|BulkDownloadItem)\.timeframe$/,
    why: "the spec wins: any timeframe (an estimate's timeframe is omitted rather than null)",
  },
  {
    match: /^~ OrderItemRequest\.(market_id|series_id)$/,
    why: 'numeric market ids and series id characters only (the spec refuses 0x condition ids)',
    check: adds('pattern'),
  },
  {
    match: /^~ CreateKeyRequest\.notify_email$/,
    why: 'no notification unless asked (pmlake sends no mail offline)',
    check: (d) => canon(without(d.before, ['default'])) === canon(d.after),
  },
  {
    match: /^~ DeleteAccountRequest definition$/,
    why: 'a strict body: one with no known field must not open a deletion unnoticed',
    check: (d) => canon(d.after) === canon({ ...(d.before as object), additionalProperties: false }),
  },

  // Response schemas: pmlake always sends every field (all required), names closed sets, types what the spec
  // types, and adds fields (clients ignore unknown ones).
  { match: /^~ (\w+Response|PublicMarket|PublicMarketSummary) required$/, why: 'every field always sent', check: requiresMore },
  {
    match: /^~ MarketResponse\.(event_id|description|category|outcome_prices|outcome_token_ids|volume|volume_24h|liquidity)$/,
    why: 'the spec wins: typed fields, never null (a placeholder market has empty values, lake/README.md)',
    check: neverNull,
  },
  {
    match: /^~ (BalanceResponse|TransactionResponse)\.currency$|^~ TransactionResponse\.type$|^~ (OrderItemResponse|DownloadHistoryResponse)\.status$/,
    why: 'a closed set of the values pmlake sends',
    check: adds('enum', 'const'),
  },
  { match: /^~ ApiKeyResponse\.permissions$/, why: 'a closed set, always a list', check: (d) => neverNull({ ...d, after: without(d.after, ['enum']) }) },
  {
    match:
      /^\+ (MarketResponse\.(condition_id|series_id|status|tick_size|min_order_size|neg_risk|accepting_orders|as_of|definition_valid_from)|DownloadHistoryResponse\.(description|finished_at|kind)|OrderResponse\.(idempotency_key|minimum_applied)|UsageResponse\.(requests_by_key|total_downloads)|ApiKeyCreatedResponse\.permissions|EstimateResponse\.(in_range|coverage)|MarketEstimateResponse\.coverage)$/,
    why: 'extra response fields: the condition id and series of a market, the legacy status, the point-in-time fields of an as_of answer, history and order details, per-key usage, coverage',
  },
];

const anchor = JSON.parse(readFileSync('/work/shared/reference/anchor-openapi.json', 'utf8'));

describe("the contract against the anchor's OpenAPI document", () => {
  it('differs only where the allow-list says why', () => {
    const drift = contractDrift(anchor, buildOpenApi(routes));
    const used = new Set<Rule>();
    const unexplained: Drift[] = [];
    for (const d of drift) {
      const rule = ALLOWED.find((r) => r.match.test(d.key) && (!r.check || r.check(d)));
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

  it('a rule accepts only the change it names: a bound yes, a changed type, a lost date-time or an undocumented code no', () => {
    const unexplained = (doc: any): string[] =>
      contractDrift(anchor, doc)
        .filter((d) => !ALLOWED.some((r) => r.match.test(d.key) && (!r.check || r.check(d))))
        .map((d) => d.key);
    const doc = buildOpenApi(routes) as any;
    expect(unexplained(doc)).toEqual([]);
    const param = (d: any, path: string, name: string) => d.paths[path].get.parameters.find((p: any) => p.name === name);
    const typed = structuredClone(doc);
    param(typed, '/v1/trades/ohlcv', 'market_id').schema = { type: 'integer', maxLength: 200 };
    const dated = structuredClone(doc);
    delete dated.components.schemas.TradeResponse.properties.timestamp.format;
    const coded = structuredClone(doc);
    coded.paths['/v1/trades'].get.responses['500'] = { description: 'oops' };
    const nulled = structuredClone(doc);
    nulled.components.schemas.MarketResponse.properties.volume = { type: 'string' };
    expect(unexplained(typed)).toEqual(['~ GET /v1/trades/ohlcv parameter query market_id']);
    expect(unexplained(dated)).toEqual(['~ TradeResponse.timestamp']);
    expect(unexplained(coded)).toEqual(['~ GET /v1/trades response codes']);
    expect(unexplained(nulled)).toEqual(['~ MarketResponse.volume']);
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
