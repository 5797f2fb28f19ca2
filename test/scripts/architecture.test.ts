import { describe, expect, it } from 'vitest';
import {
  checkArchitecture,
  findCycles,
  importsOf,
  kindLists,
  packageOf,
  resolveSpecifier,
  SOURCE_BUILDERS,
  UNNAMED_HANDLER,
  type Graph,
} from '../../scripts/architecture.js';

// The rules and how imports are read: scripts/architecture.ts (which `npm run lint` also runs).

describe('architecture helpers (so the checks below can fail)', () => {
  it('finds cycles in a small graph, each as a closed path through its members, and none in a DAG', () => {
    const cyclic: Graph = new Map([
      ['a', ['b']],
      ['b', ['c', 'd']],
      ['c', ['a']],
      ['d', []],
      ['e', ['e']],
    ]);
    expect(findCycles(cyclic)).toEqual([
      ['a', 'b', 'c', 'a'],
      ['e', 'e'],
    ]);
    const dag: Graph = new Map([
      ['a', ['b', 'c']],
      ['b', ['c']],
      ['c', ['x-not-in-graph']],
    ]);
    expect(findCycles(dag)).toEqual([]);
  });

  it('reads static, type-only, re-exported, side-effect and literal dynamic imports, and not comments or strings', () => {
    const source = [
      "import a from './a.js';",
      "import type { B } from './b.js';",
      "export { c } from './c.js';",
      "export * from '../d.js';",
      'import {\n  e,\n  f,\n} from "./ef.js";',
      "import './side.js';",
      "const g = () => import('./g.js');",
      "// import x from './comment.js';",
      'const s = "import y from \'./string.js\'";',
    ].join('\n');
    expect(importsOf(source)).toEqual(['./a.js', './b.js', './c.js', '../d.js', './ef.js', './side.js', './g.js']);
    const exists = (f: string) => ['src/a.ts', 'src/http/index.ts'].includes(f);
    expect(resolveSpecifier('src/x/y.ts', '../a.js', exists)).toBe('src/a.ts');
    expect(resolveSpecifier('src/x.ts', './http', exists)).toBe('src/http/index.ts');
    expect(resolveSpecifier('src/x.ts', 'express', exists)).toBe('express');
    expect(packageOf('express')).toBe('express');
    expect(packageOf('express/lib/router')).toBe('express');
    expect(packageOf('@duckdb/node-api')).toBe('@duckdb/node-api');
    expect(packageOf('node:fs')).toBeNull();
  });

  it('finds lists of data kinds (enums, arrays, unions) and not records, single kinds or other lists sharing a word', () => {
    const ids = new Set(['trades', 'ohlcv', 'orderbook', 'raw']);
    const source = [
      "const a = z.enum(['trades', 'raw', 'ohlcv']);",
      "type B = 'trades' | 'ohlcv' | undefined;",
      "const c = new Set(['trades', 'ohlcv', 'new_kind']);",
      'const d = { trades: 1, ohlcv: 8 };',
      "const e = { kind: 'raw' as const, shape: ['raw', 'normalized'] };",
      "const f = ['top', 'volume', 'trades', 'orderbook', 'created'];",
      "// ['trades', 'ohlcv'] in a comment",
    ].join('\n');
    expect(kindLists(source, ids)).toEqual([1, 2, 3]);
  });

  it('tells a named route handler from one written in place or reading res.locals', () => {
    for (const line of ['    handler: listMarkets,', '      handler: getOpenApi,', ' * `defineRoute({ …, handler: listX })`.'])
      expect(UNNAMED_HANDLER.test(line)).toBe(false);
    for (const line of [
      '    handler: async (req, res, ctx) => {',
      '    handler: (req) => x(req),',
      '    handler: async () => ({ ok: true }),',
      '    handler: function (req) {',
      '    handler: req => x(req),',
      '  const q = res.locals.query as z.infer<typeof Q>;',
      '  await resolve(res.locals.params.market_id);',
    ])
      expect(UNNAMED_HANDLER.test(line)).toBe(true);
  });
});

describe('architecture of src/ and ingest/', () => {
  const { files, edges, offenders } = checkArchitecture();

  it('reads a plausible graph', () => {
    expect(files).toBeGreaterThan(100);
    expect(edges).toBeGreaterThan(300);
  });

  it('(a) has no import cycles (type-only imports included)', () => {
    expect(offenders.cycles).toEqual([]);
  });

  it('(b) nothing outside src/http/ imports src/http/ except src/server.ts', () => {
    expect(offenders['into-http']).toEqual([]);
  });

  it('(c) only src/http/ imports express (and bench/bare-express.ts, the baseline)', () => {
    expect(offenders.express).toEqual([]);
  });

  it('(d) within src/, read_parquet appears only in src/lake/ and src/query/', () => {
    expect(offenders.read_parquet).toEqual([]);
  });

  it('(e) src/ imports nothing from bench/ or test/', () => {
    expect(offenders['bench-or-test']).toEqual([]);
  });

  it('(f) no import climbs into a layer above (src/s3/ does not import src/exports/)', () => {
    expect(offenders.upward).toEqual([]);
  });

  it('(g) data kinds are listed only in src/catalogue/', () => {
    expect(offenders['kind-lists']).toEqual([]);
  });

  it('(h) src/http/ route handlers are named functions reading their typed input, not res.locals', () => {
    expect(offenders['named-handlers']).toEqual([]);
  });

  it('(i) nothing in src/http/ builds lake sources', () => {
    expect(offenders['http-sources']).toEqual([]);
    expect(SOURCE_BUILDERS.test('const lake = lakeSources(ctx.config.lakeDir);')).toBe(true);
    expect(SOURCE_BUILDERS.test('partitionSource(v, name, values)')).toBe(true);
    expect(SOURCE_BUILDERS.test('const lake = ctx.lake.sources;')).toBe(false);
  });

  it('(j) only the recorder, the simulated venue and the replay server import ws', () => {
    expect(offenders['venue-socket']).toEqual([]);
    expect(packageOf('ws')).toBe('ws');
  });

  it('(k) only the chain indexer, its ingest and the simulated venue import viem', () => {
    expect(offenders['chain-library']).toEqual([]);
    expect(packageOf('viem/utils')).toBe('viem');
  });
});
