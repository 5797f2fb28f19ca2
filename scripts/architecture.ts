import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { KIND_IDS } from '../src/catalogue/kinds.js';

/**
 * The layering rules of ARCHITECTURE.md, read from the source itself. `npm run lint` runs this file (it prints each
 * offender and exits 1); test/scripts/architecture.test.ts asserts the same rules and tests the helpers on small inputs.
 *   (a) no import cycles among src/, ingest/ and sim/ (`import type` edges included: a type-only cycle is still a
 *       tangle, and eslint's import-x/no-cycle would not see it);
 *   (b) nothing outside src/http/ imports src/http/ except the composition root, src/server.ts;
 *   (c) only src/http/ imports Express (bench/bare-express.ts is the http-small scenario's baseline);
 *   (d) within src/, `read_parquet` appears only in src/lake/ and src/query/ (one way to the lake);
 *   (e) src/ imports nothing from bench/ or test/;
 *   (f) no import climbs from a lower layer into one above it (UPWARD: src/s3/ is below src/exports/, src/lake/ below
 *       src/query/);
 *   (g) a data kind is declared only in the catalogue: outside src/catalogue/, no array literal (a z.enum, a
 *       Set) or union type in src/ lists kinds (two or more kind ids, most of its members);
 *   (h) in src/http/, a route's handler is a named function (`handler: listMarkets`, made with defineRoute) and
 *       reads its query, path and body from its typed input, never from res.locals.
 *   (i) nothing in src/http/ builds lake sources: a handler reads through its request's lake session (`ctx.lake`);
 *   (j) within src/, ingest/ and sim/, only the recorder (src/record/), the simulated venue (sim/simulate/) and the
 *       replay server (src/http/replay/) import `ws`: sockets are theirs, so pings and back-pressure live in few places;
 *   (k) within src/, ingest/ and sim/, only the chain indexer (src/chain/), the chain files' ingest (ingest/chain/) and the
 *       simulated venue import `viem`: ABIs and decoding live in one place.
 * Imports are read with TypeScript's own scanner (`import … from`, `export … from`, `import type`, side-effect
 * imports and `import('literal')`, which eslint's no-restricted-imports does not see), so comments and strings
 * that merely look like imports do not count.
 */

export const REPO = path.resolve(import.meta.dirname, '..');

export type Graph = Map<string, string[]>;
export type Edge = { from: string; to: string };
export type Rule =
  | 'cycles'
  | 'into-http'
  | 'express'
  | 'read_parquet'
  | 'bench-or-test'
  | 'upward'
  | 'kind-lists'
  | 'named-handlers'
  | 'http-sources'
  | 'venue-socket'
  | 'chain-library';
export const RULES: Record<Rule, string> = {
  cycles: '(a) no import cycles among src/, ingest/ and sim/',
  'into-http': '(b) nothing outside src/http/ imports src/http/ except src/server.ts',
  express: '(c) only src/http/ (and bench/bare-express.ts) imports express',
  read_parquet: '(d) within src/, read_parquet appears only in src/lake/ and src/query/',
  'bench-or-test': '(e) src/ imports nothing from bench/ or test/',
  upward: '(f) no import climbs into a layer above (src/s3/ does not import src/exports/, src/lake/ not src/query/)',
  'kind-lists': '(g) data kinds are listed only in src/catalogue/ (derive the list from it)',
  'named-handlers': '(h) src/http/ route handlers are named functions reading a typed input, not res.locals.query/params/body',
  'http-sources': '(i) nothing in src/http/ builds lake sources (lakeSources, datasetSource, partitionSource, versionSources): use ctx.lake',
  'venue-socket': '(j) within src/, ingest/ and sim/, only src/record/, sim/simulate/ and src/http/replay/ import ws',
  'chain-library': '(k) within src/, ingest/ and sim/, only src/chain/, ingest/chain/ and sim/simulate/ import viem',
};

/** The folders that may open the venue's socket (rule j). */
export const VENUE_SOCKET_OWNERS = ['src/record/', 'sim/simulate/', 'src/http/replay/'];
export const CHAIN_LIBRARY_OWNERS = ['src/chain/', 'ingest/chain/', 'sim/simulate/'];

/** Pairs [lower, upper] of directories: nothing under the first imports anything under the second. */
export const UPWARD: [string, string][] = [
  ['src/s3/', 'src/exports/'],
  ['src/lake/', 'src/query/'],
];

/** A route row whose handler is written in place (an arrow or function expression), or a read of the gate's old res.locals fields. */
export const UNNAMED_HANDLER = /\bhandler:\s*(async\b|function\b|\(|[A-Za-z_$][\w$]*\s*=>)|\bres\.locals\.(query|params|body)\b/;

/** Calls that build a data set's source from files; outside the lake session only src/lake/ and tools make them. */
export const SOURCE_BUILDERS = /\b(lakeSources|datasetSource|partitionSource|versionSources)\(/;

/** Every module specifier a TypeScript source names (static, type-only, re-exports, literal dynamic imports). */
export function importsOf(source: string): string[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName);
}

/** A relative specifier resolved to a repository path (`./x.js` → `src/x.ts` when that file exists); packages as named. */
export function resolveSpecifier(fromFile: string, spec: string, exists: (rel: string) => boolean): string {
  if (!spec.startsWith('.')) return spec;
  const rel = path.posix.normalize(path.posix.join(path.posix.dirname(fromFile), spec));
  for (const candidate of [rel.replace(/\.js$/, '.ts'), rel, `${rel}.ts`, `${rel}/index.ts`]) {
    if (exists(candidate)) return candidate;
  }
  return rel;
}

/** The package a specifier names (`express/lib/x` → `express`, `@scope/p/x` → `@scope/p`), or null for a file or a builtin. */
export function packageOf(spec: string): string | null {
  if (spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('node:')) return null;
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/**
 * Cycles: strongly connected components (Tarjan) with more than one member, or a member importing itself,
 * each returned as one shortest closed path from its first member (sorted), e.g. [a, b, c, a].
 */
export function findCycles(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) components.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return components.sort((a, b) => (a[0]! < b[0]! ? -1 : 1)).map((c) => cyclePath(graph, new Set(c), c[0]!));
}

/** A shortest closed path from `start` back to itself inside one component (breadth first). */
function cyclePath(graph: Graph, members: Set<string>, start: string): string[] {
  const parent = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!members.has(w)) continue;
      if (w === start) {
        const back = [v];
        while (back[0] !== start) back.unshift(parent.get(back[0]!)!);
        return [...back, start];
      }
      if (!parent.has(w)) {
        parent.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

/**
 * Lines (1-based) where an array literal or a union type is a list of data kinds: two or more of its members,
 * and more than half, are string literals in `ids`. Object keys (a record per kind), single literals (`kind:
 * 'raw'`) and lists of other things that happen to share a word with a kind (`sort_by` values) are not.
 */
export function kindLists(source: string, ids: ReadonlySet<string>): number[] {
  const sf = ts.createSourceFile('x.ts', source, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const names = (n: ts.Node): boolean =>
    ts.isStringLiteralLike(n) ? ids.has(n.text) : ts.isLiteralTypeNode(n) && ts.isStringLiteralLike(n.literal) && ids.has(n.literal.text);
  const lines: number[] = [];
  const visit = (n: ts.Node): void => {
    const members = ts.isArrayLiteralExpression(n) ? n.elements : ts.isUnionTypeNode(n) ? n.types : null;
    const named = members?.filter(names).length ?? 0;
    if (members && named >= 2 && named * 2 > members.length) lines.push(sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return lines;
}

/** The .ts files under a repository directory, as repository paths with forward slashes. */
export function tsFiles(root: string, dir: string): string[] {
  const abs = path.join(root, dir);
  if (!fs.existsSync(abs)) return [];
  return fs
    .readdirSync(abs, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.posix.join(dir, f.split(path.sep).join('/')))
    .sort();
}

export function readEdges(root: string, files: string[]): Edge[] {
  const exists = (rel: string): boolean => {
    const stat = fs.statSync(path.join(root, rel), { throwIfNoEntry: false });
    return stat?.isFile() ?? false;
  };
  return files.flatMap((from) => importsOf(fs.readFileSync(path.join(root, from), 'utf8')).map((spec) => ({ from, to: resolveSpecifier(from, spec, exists) })));
}

const inHttp = (f: string): boolean => f.startsWith('src/http/');
const show = (edges: Edge[]): string[] => edges.map((e) => `${e.from} -> ${e.to}`);

/** Every rule's offenders (empty lists when the tree keeps the rules). */
export function checkArchitecture(root = REPO): { files: number; edges: number; offenders: Record<Rule, string[]> } {
  const core = [...tsFiles(root, 'src'), ...tsFiles(root, 'ingest'), ...tsFiles(root, 'sim')];
  const edges = readEdges(root, core);
  const graph: Graph = new Map(core.map((f) => [f, [] as string[]]));
  for (const e of edges) if (graph.has(e.to)) graph.get(e.from)!.push(e.to);
  const everything = [...edges, ...readEdges(root, [...tsFiles(root, 'bench'), ...tsFiles(root, 'scripts')])];
  const parquetLines = tsFiles(root, 'src')
    .filter((f) => !f.startsWith('src/lake/') && !f.startsWith('src/query/'))
    .flatMap((f) =>
      fs
        .readFileSync(path.join(root, f), 'utf8')
        .split('\n')
        .flatMap((line, i) => (line.includes('read_parquet') ? [`${f}:${i + 1}`] : [])),
    );
  const kinds = new Set<string>(KIND_IDS);
  const kindListLines = tsFiles(root, 'src')
    .filter((f) => !f.startsWith('src/catalogue/'))
    .flatMap((f) => kindLists(fs.readFileSync(path.join(root, f), 'utf8'), kinds).map((line) => `${f}:${line}`));
  const handlerLines = tsFiles(root, 'src/http').flatMap((f) =>
    fs
      .readFileSync(path.join(root, f), 'utf8')
      .split('\n')
      .flatMap((line, i) => (UNNAMED_HANDLER.test(line) ? [`${f}:${i + 1}`] : [])),
  );
  return {
    files: core.length,
    edges: edges.filter((e) => graph.has(e.to)).length,
    offenders: {
      cycles: findCycles(graph).map((c) => c.join(' -> ')),
      'into-http': show(edges.filter((e) => inHttp(e.to) && !inHttp(e.from) && e.from !== 'src/server.ts')),
      express: show(everything.filter((e) => packageOf(e.to) === 'express' && !inHttp(e.from) && e.from !== 'bench/bare-express.ts')),
      read_parquet: parquetLines,
      'bench-or-test': show(edges.filter((e) => e.from.startsWith('src/') && /^(bench|test)\//.test(e.to))),
      upward: show(edges.filter((e) => UPWARD.some(([lower, upper]) => e.from.startsWith(lower) && e.to.startsWith(upper)))),
      'kind-lists': kindListLines,
      'named-handlers': handlerLines,
      'http-sources': tsFiles(root, 'src/http').flatMap((f) =>
        fs
          .readFileSync(path.join(root, f), 'utf8')
          .split('\n')
          .flatMap((line, i) => (SOURCE_BUILDERS.test(line) ? [`${f}:${i + 1}`] : [])),
      ),
      'venue-socket': show(edges.filter((e) => packageOf(e.to) === 'ws' && !VENUE_SOCKET_OWNERS.some((d) => e.from.startsWith(d)))),
      'chain-library': show(edges.filter((e) => packageOf(e.to) === 'viem' && !CHAIN_LIBRARY_OWNERS.some((d) => e.from.startsWith(d)))),
    },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { files, edges, offenders } = checkArchitecture();
  let failed = 0;
  for (const [rule, list] of Object.entries(offenders) as [Rule, string[]][]) {
    if (!list.length) continue;
    failed += list.length;
    process.stderr.write(`architecture: ${RULES[rule]}:\n${list.map((o) => `  ${o}\n`).join('')}`);
  }
  if (failed) process.stderr.write(`architecture: ${failed} offender(s) in ${files} files, ${edges} internal imports\n`);
  process.exitCode = failed ? 1 : 0;
}
