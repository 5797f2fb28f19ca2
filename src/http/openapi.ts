import { z } from 'zod';
import { defineRoute, type Route } from './route.js';
import { LINK_HEADER_DOC } from './next-link.js';

/**
 * GET /v1/openapi.json: an OpenAPI 3.1 document generated from the route table itself — the same zod
 * schemas the app validates with (request side as their input type, responses as their output type), so
 * the description cannot drift from what is enforced. This module knows no table: src/http/routes.ts hands
 * its own to openapiRoutes, and the row it gets back is one of the table's (so the document describes itself).
 */
type Json = Record<string, unknown>;

const VALIDATION_ERROR: Json = {
  type: 'object',
  title: 'ValidationError',
  required: ['loc', 'msg', 'type'],
  properties: {
    loc: { type: 'array', title: 'Location', items: { anyOf: [{ type: 'string' }, { type: 'integer' }] } },
    msg: { type: 'string', title: 'Message' },
    type: { type: 'string', title: 'Error Type' },
    input: { title: 'Input' },
  },
};

const HTTP_VALIDATION_ERROR: Json = {
  type: 'object',
  title: 'HTTPValidationError',
  properties: { detail: { type: 'array', title: 'Detail', items: { $ref: '#/components/schemas/ValidationError' } } },
};

const ERROR_DETAIL: Json = {
  type: 'object',
  title: 'ErrorDetail',
  required: ['detail'],
  properties: {
    detail: {
      anyOf: [{ type: 'string' }, { type: 'object', required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } } }],
    },
  },
};

export function buildOpenApi(table: readonly Route[]): Json {
  const schemas: Json = { ValidationError: VALIDATION_ERROR, HTTPValidationError: HTTP_VALIDATION_ERROR, ErrorDetail: ERROR_DETAIL };
  const toSchema = (s: z.ZodType, io: 'input' | 'output'): Json => {
    const out = z.toJSONSchema(s, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Json;
    const defs = (out.$defs ?? {}) as Json;
    delete out.$defs;
    delete out.$schema;
    for (const [k, v] of Object.entries(defs)) schemas[k] = anchorStyle(rewriteRefs(v), io);
    return anchorStyle(rewriteRefs(out), io) as Json;
  };
  const err = (description: string): Json => ({
    description,
    content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorDetail' } } },
  });

  const paths: Record<string, Record<string, Json>> = {
    '/health': {
      get: {
        tags: ['meta'],
        summary: 'Liveness',
        operationId: 'get_health',
        responses: { '200': { description: 'Service is up', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
  };
  for (const r of table) {
    const p = r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const parameters: Json[] = [];
    for (const [where, schema] of [
      ['path', r.params],
      ['query', r.query],
    ] as const) {
      if (!schema) continue;
      const obj = toSchema(schema, 'input');
      const props = (obj.properties ?? {}) as Record<string, Json>;
      const required = new Set((obj.required ?? []) as string[]);
      for (const [name, s] of Object.entries(props)) {
        const { description, ...rest } = s;
        const must = where === 'path' || required.has(name);
        // An optional query parameter without a default is the anchor's `X | None = None`: written as its anyOf.
        const optional = !must && !('default' in rest) && !('anyOf' in rest);
        const schema = where === 'query' ? closedSetAsPattern(rest) : rest;
        const param: Json = { name, in: where, required: must, schema: optional ? { anyOf: [schema, { type: 'null' }] } : schema };
        if (typeof description === 'string') param.description = description;
        parameters.push(param);
      }
    }
    const okContent: Json = {};
    if (r.response) okContent['application/json'] = { schema: toSchema(r.response, 'output') };
    for (const t of r.produces ?? []) okContent[t] = { schema: t.startsWith('text/') ? { type: 'string' } : { type: 'string', format: 'binary' } };
    if (Object.keys(okContent).length === 0) okContent['application/json'] = { schema: {} };
    const ok: Json = { description: 'Successful Response', content: okContent };
    if (r.paged) ok.headers = { Link: { description: LINK_HEADER_DOC, schema: { type: 'string' } } };
    const responses: Json = { [String(r.status ?? 200)]: ok };
    if (r.auth === 'key') responses['401'] = err('Missing or invalid API key: {"detail":"Invalid API key"}');
    if (r.credentials === 'jwt') responses['403'] = err('Called with an API key: {"detail":"This endpoint needs the dashboard bearer token"}');
    if (parameters.some((x) => x.name === 'market_id' || x.name === 'series_id')) {
      responses['404'] = err('Unknown market or series: {"detail":"Market not found"}');
    }
    if (r.params || r.query || r.body) {
      responses['422'] = {
        description: 'Validation Error',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/HTTPValidationError' } } },
      };
    }
    responses['429'] = err('Rate limit exceeded (Retry-After says when to retry), or fair-use cap reached');
    const op: Json = {
      tags: [r.tag],
      summary: r.summary,
      operationId: `${r.method}_${p
        .replace(/[{}]/g, '')
        .replace(/[^A-Za-z0-9]+/g, '_')
        .replace(/^_|_$/g, '')}`,
      parameters,
      responses,
    };
    if (r.body) op.requestBody = { required: true, content: { 'application/json': { schema: toSchema(r.body, 'input') } } };
    // Keyed routes take X-API-Key or the dashboard bearer JWT (accountAuthenticator; alternatives, as in the
    // anchor); a 'jwt' route takes only the bearer token.
    if (r.auth === 'key') op.security = r.credentials === 'jwt' ? [{ HTTPBearer: [] }] : [{ HTTPBearer: [] }, { APIKeyHeader: [] }];
    (paths[p] ??= {})[r.method] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'pmlake',
      version: '1.0.0',
      description:
        'Historical data of a prediction-market venue: markets, series, on-chain trades, OHLCV at any timeframe, order books at any instant, downloads and exports. Send your key in the X-API-Key header (the web dashboard may send a bearer JWT instead).',
    },
    servers: [{ url: '/' }],
    paths,
    components: {
      schemas,
      securitySchemes: {
        HTTPBearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            'Legacy dashboard scheme: Authorization: Bearer <JWT> from the identity provider (HS256 secret or JWKS, `exp` required), mapped to the user by its `email` claim. X-API-Key wins when both are sent. Accepted only when the service is configured with PMLAKE_JWT_SECRET or PMLAKE_JWKS_FILE.',
        },
        APIKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
      },
    },
  };
}

/**
 * A query parameter's closed set written as the anchor writes it (FastAPI's `Query(pattern=…)`): `pattern:
 * ^(a|b)$` instead of zod's `enum` — the same values accepted, and the two documents compare equal. A set that
 * already states its pattern keeps only the pattern.
 */
function closedSetAsPattern(s: Json): Json {
  const values = s.enum;
  if (s.type !== 'string' || !Array.isArray(values) || !values.every((v) => typeof v === 'string' && /^[A-Za-z0-9_-]+$/.test(v))) return s;
  const { enum: _set, ...rest } = s;
  return { ...rest, pattern: typeof s.pattern === 'string' ? s.pattern : `^(${(values as string[]).join('|')})$` };
}

const SAFE = Number.MAX_SAFE_INTEGER;

/**
 * zod's JSON Schema written the way the anchor's document writes the same contract, so the two compare equal
 * where pmlake behaves the same: a nullable field as `anyOf [X, null]` (not `type: [X, "null"]`), no bounds
 * that only restate JavaScript's safe-integer range, a record as `additionalProperties: true`, and responses
 * without `additionalProperties: false` (a response may gain fields; clients ignore the ones they do not know).
 */
function anchorStyle(v: unknown, io: 'input' | 'output'): unknown {
  if (Array.isArray(v)) return v.map((x) => anchorStyle(x, io));
  if (!v || typeof v !== 'object') return v;
  const o: Json = {};
  for (const [k, x] of Object.entries(v as Json)) {
    // Field names under `properties` are not keywords: recurse into each value, keep every name.
    o[k] =
      k === 'properties' && x && typeof x === 'object'
        ? Object.fromEntries(Object.entries(x as Json).map(([n, s]) => [n, anchorStyle(s, io)]))
        : anchorStyle(x, io);
  }
  // A query boolean read from its text spellings (src/http/params.ts queryBool) is still a boolean to a client:
  // zod lists the accepted strings as an enum, which no boolean value can match.
  if (o.type === 'boolean' && Array.isArray(o.enum)) delete o.enum;
  // zod spells a date's format out as its regex too; the format alone says the same (as the anchor writes it).
  if (o.format === 'date' && typeof o.pattern === 'string') delete o.pattern;
  if (o.maximum === SAFE) delete o.maximum;
  if (o.minimum === -SAFE) delete o.minimum;
  if (o.type === 'object' && isEmptyObject(o.additionalProperties) && isStringNames(o.propertyNames)) {
    o.additionalProperties = true;
    delete o.propertyNames;
  }
  if (io === 'output' && o.type === 'object' && o.additionalProperties === false) delete o.additionalProperties;
  if (Array.isArray(o.type) && o.type.length === 2 && o.type[1] === 'null') {
    const { type, ...rest } = o;
    return { anyOf: [{ ...rest, type: (type as string[])[0] }, { type: 'null' }] };
  }
  return o;
}
const isEmptyObject = (x: unknown): boolean => !!x && typeof x === 'object' && Object.keys(x).length === 0;
const isStringNames = (x: unknown): boolean => !!x && typeof x === 'object' && (x as Json).type === 'string' && Object.keys(x).length === 1;

function rewriteRefs(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(rewriteRefs);
  if (v && typeof v === 'object') {
    const o: Json = {};
    for (const [k, x] of Object.entries(v as Json)) {
      o[k] = k === '$ref' && typeof x === 'string' ? x.replace('#/$defs/', '#/components/schemas/') : rewriteRefs(x);
    }
    return o;
  }
  return v;
}

/**
 * The row serving the document of `table`, built once on the first request: `table` is a function because
 * the table holding this row is not complete while its own rows are being made.
 */
export function openapiRoutes(table: () => readonly Route[]): Route[] {
  let built: Json | undefined;
  async function getOpenApi(): Promise<Json> {
    return (built ??= buildOpenApi(table()));
  }
  return [
    defineRoute({
      method: 'get',
      path: '/v1/openapi.json',
      cost: 'cheap',
      auth: 'public',
      limit: 'none',
      tag: 'meta',
      summary: 'This API described as OpenAPI 3.1',
      handler: getOpenApi,
    }),
  ];
}
