import http from 'node:http';
import { NotAvailable } from './runner.js';

/**
 * A minimal HTTP client for the benchmark: node:http (not fetch, whose web streams cost more per chunk than
 * the server spends producing them), a fresh connection per request, bodies either parsed as JSON or counted
 * and dropped — a download is "read by an HTTP client" without storing it.
 */
export type HttpResult = { status: number; headers: http.IncomingHttpHeaders; bytes: number; body?: Buffer };

const agent = new http.Agent({ keepAlive: false });

export function request(url: string, opts: { method?: string; headers?: Record<string, string>; body?: unknown; keep?: boolean } = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    const req = http.request(
      url,
      {
        method: opts.method ?? 'GET',
        agent,
        headers: {
          ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}),
          ...opts.headers,
        },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        // Error bodies are always kept: they explain an n/a.
        const keep = opts.keep || status >= 400;
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          if (keep) chunks.push(c);
        });
        res.on('end', () => resolve({ status, headers: res.headers, bytes, ...(keep ? { body: Buffer.concat(chunks) } : {}) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

/** GET/POST returning parsed JSON; a 404 for an unknown route or 501 becomes NotAvailable, other errors throw. */
export async function requestJson<T = unknown>(
  url: string,
  key: string,
  opts: { method?: string; body?: unknown } = {},
): Promise<{ status: number; json: T; bytes: number }> {
  const res = await request(url, { ...opts, headers: { 'x-api-key': key }, keep: true });
  checkStatus(url, res);
  return { status: res.status, json: JSON.parse(res.body!.toString('utf8')) as T, bytes: res.bytes };
}

/** GET whose body is counted, not kept. */
export async function requestCount(url: string, key: string): Promise<HttpResult> {
  const res = await request(url, { headers: { 'x-api-key': key } });
  checkStatus(url, res);
  return res;
}

export function checkStatus(url: string, res: HttpResult): void {
  if (res.status >= 200 && res.status < 300) return;
  const text = res.body?.toString('utf8').slice(0, 300) ?? '';
  const route = new URL(url).pathname;
  // The app's catch-all 404 has a generic detail; a handler's 404 names what is missing ("Market not found").
  if ((res.status === 404 && /"detail":"Not ?found"/i.test(text)) || res.status === 501 || res.status === 405) {
    throw new NotAvailable(`${route} not served yet (${res.status})`);
  }
  throw new Error(`${route} → ${res.status} ${text}`);
}

export function qs(params: Record<string, string | number | undefined>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.set(k, String(v));
  return u.toString();
}
