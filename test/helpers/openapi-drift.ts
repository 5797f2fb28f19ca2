/**
 * The contract comparison the anchor SDK's drift checker makes (operations, parameters, request bodies,
 * response-code sets, component schemas; prose ignored), reimplemented over two OpenAPI documents so a test
 * can hold pmlake's /v1/openapi.json to the anchor's. Each difference has a stable `key` (what differs, no
 * values) for an allow-list and a `text` with the values for a reader.
 */
type Json = Record<string, any>;
/**
 * `before` / `after`: the anchor's and pmlake's values of what differs (prose removed; response codes as sorted
 * lists), so an allow-list rule can state exactly which change it accepts, not just where.
 */
export type Drift = { key: string; text: string; before?: unknown; after?: unknown };

/** Documentation-only keywords: they change nothing a caller sends or receives. */
const PROSE = new Set(['title', 'description', 'summary', 'examples', 'example', 'externalDocs']);
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'];

/** `node` without prose; under `properties` the keys are field names (a field called `description` stays). */
export function normalize(node: unknown, fieldNames = false): unknown {
  if (Array.isArray(node)) return node.map((x) => normalize(x));
  if (node && typeof node === 'object') {
    const out: Json = {};
    for (const [k, v] of Object.entries(node as Json)) {
      if (!fieldNames && PROSE.has(k)) continue;
      out[k] = normalize(v, k === 'properties' && !fieldNames);
    }
    return out;
  }
  return node;
}

/** Canonical JSON (sorted keys), so equal contracts compare equal whatever the key order. */
export function canon(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v as Json)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canon((v as Json)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'undefined';
}
const same = (a: unknown, b: unknown): boolean => canon(normalize(a)) === canon(normalize(b));
const short = (v: unknown): string => {
  const t = canon(v);
  return t.length <= 160 ? t : `${t.slice(0, 157)}...`;
};

function operations(doc: Json): Map<string, Json> {
  const ops = new Map<string, Json>();
  for (const [path, item] of Object.entries((doc.paths ?? {}) as Json))
    for (const [m, op] of Object.entries(item as Json)) if (METHODS.includes(m.toLowerCase())) ops.set(`${m.toUpperCase()} ${path}`, op);
  return ops;
}

function parameters(op: Json): Map<string, Json> {
  const out = new Map<string, Json>();
  for (const p of (op.parameters ?? []) as Json[]) {
    const { name, in: where, ...rest } = p;
    out.set(`${where} ${name}`, rest);
  }
  return out;
}

const sortedKeys = (o: unknown): string[] => Object.keys((o ?? {}) as Json).sort();

/** Differences of `current` from `anchor`: `-` the anchor has it and `current` lacks it, `+` the reverse, `~` changed. */
export function contractDrift(anchor: Json, current: Json): Drift[] {
  const out: Drift[] = [];
  const add = (key: string, detail = '', values?: { before: unknown; after: unknown }) =>
    out.push({ key, text: detail ? `${key}: ${detail}` : key, ...values });
  if (anchor.info?.version !== current.info?.version) add('~ API version', `${anchor.info?.version} -> ${current.info?.version}`);

  const a = operations(anchor);
  const c = operations(current);
  for (const k of [...a.keys()].sort()) if (!c.has(k)) add(`- operation ${k}`);
  for (const k of [...c.keys()].sort()) if (!a.has(k)) add(`+ operation ${k}`);
  for (const k of [...a.keys()].sort()) {
    const ao = a.get(k)!;
    const co = c.get(k);
    if (!co) continue;
    const ap = parameters(ao);
    const cp = parameters(co);
    for (const p of [...ap.keys()].sort()) if (!cp.has(p)) add(`- ${k} parameter ${p}`);
    for (const p of [...cp.keys()].sort()) if (!ap.has(p)) add(`+ ${k} parameter ${p}`);
    for (const p of [...ap.keys()].sort())
      if (cp.has(p) && !same(ap.get(p), cp.get(p)))
        add(`~ ${k} parameter ${p}`, `${short(normalize(ap.get(p)))} -> ${short(normalize(cp.get(p)))}`, {
          before: normalize(ap.get(p)),
          after: normalize(cp.get(p)),
        });
    if (!same(ao.requestBody, co.requestBody))
      add(`~ ${k} requestBody`, `${short(normalize(ao.requestBody))} -> ${short(normalize(co.requestBody))}`, {
        before: normalize(ao.requestBody),
        after: normalize(co.requestBody),
      });
    const ac = sortedKeys(ao.responses);
    const cc = sortedKeys(co.responses);
    if (ac.join() !== cc.join()) add(`~ ${k} response codes`, `[${ac.join(',')}] -> [${cc.join(',')}]`, { before: ac, after: cc });
  }

  const as = (anchor.components?.schemas ?? {}) as Json;
  const cs = (current.components?.schemas ?? {}) as Json;
  for (const n of Object.keys(as).sort()) if (!(n in cs)) add(`- schema ${n}`);
  for (const n of Object.keys(cs).sort()) if (!(n in as)) add(`+ schema ${n}`);
  for (const n of Object.keys(as).sort()) {
    if (!(n in cs) || same(as[n], cs[n])) continue;
    const before = normalize(as[n]) as Json;
    const after = normalize(cs[n]) as Json;
    const bp = (before.properties ?? {}) as Json;
    const ap = (after.properties ?? {}) as Json;
    for (const p of Object.keys(bp).sort()) if (!(p in ap)) add(`- ${n}.${p}`);
    for (const p of Object.keys(ap).sort()) if (!(p in bp)) add(`+ ${n}.${p}`, short(ap[p]), { before: undefined, after: ap[p] });
    for (const p of Object.keys(bp).sort())
      if (p in ap && canon(bp[p]) !== canon(ap[p])) add(`~ ${n}.${p}`, `${short(bp[p])} -> ${short(ap[p])}`, { before: bp[p], after: ap[p] });
    const br = [...((before.required ?? []) as string[])].sort();
    const ar = [...((after.required ?? []) as string[])].sort();
    if (br.join() !== ar.join()) add(`~ ${n} required`, `[${br.join(',')}] -> [${ar.join(',')}]`, { before: br, after: ar });
    const rest = (s: Json) => Object.fromEntries(Object.entries(s).filter(([k]) => k !== 'properties' && k !== 'required'));
    if (canon(rest(before)) !== canon(rest(after)))
      add(`~ ${n} definition`, `${short(rest(before))} -> ${short(rest(after))}`, { before: rest(before), after: rest(after) });
  }
  return out;
}
