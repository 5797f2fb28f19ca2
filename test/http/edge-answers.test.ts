import http from 'node:http';
import net from 'node:net';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BODY_TOO_LARGE } from '../../src/http/body-limits.js';
import { MAX_DRAINED_BYTES } from '../../src/http/unread-body.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import type { RunningServer } from '../../src/server.js';

/**
 * Hardening issue, item 9 (a) and (b), on a real server and real sockets. (a) POST /v1/user/provision and
 * /v1/user/delete-request refused with 403 before reading the body, so a 20 MB body got a 403 (or, once the
 * connection was cut with the upload still arriving, a reset) instead of the 413 its size earns. (b) What Node's own
 * HTTP parser refuses (headers too large, a NUL in the path) was a bare status line without the JSON `detail`
 * every other error carries.
 */
const JWT_SECRET = 'edge-answers-jwt-secret-0123456789';
const tmp = tempDir();
let srv: RunningServer;
let port: number;
let jwt: string;

beforeAll(async () => {
  srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_JWT_SECRET: JWT_SECRET }));
  port = Number(new URL(srv.url).port);
  jwt = await new SignJWT({ email: 'edge@example.com' })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(JWT_SECRET));
});
afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

const TWENTY_MB = Buffer.alloc(20 * 1024 * 1024, 0x20);
const ROUTES = ['/v1/user/provision', '/v1/user/delete-request'];

type Answer = { status: number; headers: Record<string, string>; body: string };

/** Node's own client, which sends the whole body before it reads the answer. `chunked`: no Content-Length. */
function nodePost(path: string, headers: Record<string, string>, body: Buffer, chunked = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path, method: 'POST', agent: false, headers: { 'content-type': 'application/json', ...headers } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers as Record<string, string>, body: text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (!chunked) req.setHeader('content-length', body.length);
    // Written in pieces, as a client streaming a file does.
    for (let at = 0; at < body.length; at += 1024 * 1024) req.write(body.subarray(at, at + 1024 * 1024));
    req.end();
  });
}

/**
 * Writes `parts` on one raw connection (`gapMs` apart) and collects every byte it gets back until the server closes
 * it. `readAfterWrite`: reads nothing until every part is written, as a client that sends its body before it reads.
 * `failed`: the socket's error (a broken pipe, a reset), if any.
 */
function rawExchange(
  parts: (string | Buffer)[],
  opts: { gapMs?: number; timeoutMs?: number; readAfterWrite?: boolean } = {},
): Promise<{ text: string; closed: boolean; failed: string | null }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    let failed: string | null = null;
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed, failed });
    };
    const timer = setTimeout(() => done(false), opts.timeoutMs ?? 5000);
    socket.setEncoding('latin1');
    if (opts.readAfterWrite) socket.pause();
    socket.on('data', (c: string) => (text += c));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      failed = e.code ?? e.message;
      done(true);
    });
    socket.on('close', () => done(true));
    socket.once('connect', async () => {
      for (const p of parts) {
        if (socket.destroyed) return;
        socket.write(p);
        if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      }
      socket.resume();
    });
  });
}

/** The answers in `text`, in order (bodies by Content-Length). */
function answers(text: string): Answer[] {
  const out: Answer[] = [];
  let rest = text;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) throw new Error(`not an HTTP answer: ${JSON.stringify(rest.slice(0, 200))}`);
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
    const length = Number(headers['content-length'] ?? 0);
    out.push({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine!)![1]), headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}

describe('item 9 (a): a body too large for the JSON step is a 413 with a detail on the bearer-only routes', () => {
  it('a 20 MB body is a 413 whoever sends it: an API key (was 403), the dashboard token, no credentials (was 401)', async () => {
    const key = await createTestKey(srv, { email: 'edge@example.com', name: 'big' });
    const senders: [string, Record<string, string>][] = [
      ['api key', { 'x-api-key': key }],
      ['bearer token', { authorization: `Bearer ${jwt}` }],
      ['no credentials', {}],
    ];
    const remaining: number[] = [];
    for (const path of ROUTES) {
      for (const [who, headers] of senders) {
        const viaFetch = await fetch(srv.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: TWENTY_MB });
        expect(viaFetch.status, `fetch ${path} ${who}`).toBe(413);
        expect(viaFetch.headers.get('content-type'), `fetch ${path} ${who}`).toMatch(/^application\/json/);
        expect(await viaFetch.json(), `fetch ${path} ${who}`).toEqual({ detail: BODY_TOO_LARGE });
        if (who === 'api key') remaining.push(Number(viaFetch.headers.get('x-ratelimit-remaining')));
        const viaNode = await nodePost(path, headers, TWENTY_MB);
        expect(viaNode.status, `http ${path} ${who}`).toBe(413);
        expect(JSON.parse(viaNode.body), `http ${path} ${who}`).toEqual({ detail: BODY_TOO_LARGE });
      }
    }
    // Refused after the rate limit counted it, like every refused body.
    expect(remaining[1]).toBeLessThan(remaining[0]!);
  });

  it('sent without a length (chunked): the JSON step measures it, 413 with the same detail; refused earlier, the answer still arrives', async () => {
    const key = await createTestKey(srv, { email: 'edge@example.com', name: 'chunked' });
    for (const path of ROUTES) {
      const token = await nodePost(path, { authorization: `Bearer ${jwt}` }, TWENTY_MB, true);
      expect(token.status, path).toBe(413);
      expect(JSON.parse(token.body), path).toEqual({ detail: BODY_TOO_LARGE });
      // Its size unknown to the gate, an API key is refused first: the 403 waits for the body, so the client reads it.
      const apiKey = await nodePost(path, { 'x-api-key': key }, TWENTY_MB, true);
      expect(apiKey.status, path).toBe(403);
      expect(JSON.parse(apiKey.body).detail, path).toMatch(/dashboard bearer token/);
    }
  });

  it('the body is read off before the answer, so the same connection serves the next request', async () => {
    const key = await createTestKey(srv, { email: 'edge@example.com', name: 'keepalive' });
    const head = `POST /v1/user/provision HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${TWENTY_MB.length}\r\n\r\n`;
    const { text } = await rawExchange([head, TWENTY_MB, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'], { timeoutMs: 20_000 });
    const [refused, health] = answers(text);
    expect(refused!.status).toBe(413);
    expect(JSON.parse(refused!.body)).toEqual({ detail: BODY_TOO_LARGE });
    expect(refused!.headers.connection).toBe('keep-alive');
    expect(health!.status).toBe(200);
    expect(JSON.parse(health!.body).status).toBe('ok');
  });

  it('a client that asked to close, and reads only once its body is sent, finds the answer (was a broken pipe)', async () => {
    // Answered before the body, the connection was closed with the upload still arriving (Connection: close).
    const key = await createTestKey(srv, { email: 'edge@example.com', name: 'close' });
    for (const path of ROUTES) {
      const head = `POST ${path} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${TWENTY_MB.length}\r\nConnection: close\r\n\r\n`;
      const pieces = Array.from({ length: 20 }, (_, i) => TWENTY_MB.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024));
      const { text, failed } = await rawExchange([head, ...pieces], { gapMs: 10, readAfterWrite: true, timeoutMs: 20_000 });
      expect(failed, path).toBeNull();
      const [a] = answers(text);
      expect(a!.status, path).toBe(413);
      expect(JSON.parse(a!.body), path).toEqual({ detail: BODY_TOO_LARGE });
    }
  });

  it('a body declared beyond what is worth reading off is answered at once, and the connection closed', async () => {
    const head = `POST /v1/user/delete-request HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${jwt}\r\nContent-Type: application/json\r\nContent-Length: ${MAX_DRAINED_BYTES + 1}\r\n\r\n`;
    // Not one byte of the body is sent: the answer must not wait for it.
    const { text, closed } = await rawExchange([head, '{"reason":'], { timeoutMs: 5000 });
    expect(closed).toBe(true);
    const [a] = answers(text);
    expect(a!.status).toBe(413);
    expect(a!.headers.connection).toBe('close');
    expect(JSON.parse(a!.body)).toEqual({ detail: BODY_TOO_LARGE });
  });
});

describe("item 9 (b): Node's parser errors answer with a JSON detail", () => {
  const jsonAnswer = (text: string): Answer => {
    const all = answers(text);
    expect(all).toHaveLength(1);
    expect(all[0]!.headers['content-type']).toBe('application/json');
    expect(all[0]!.headers.connection).toBe('close');
    return all[0]!;
  };

  it('headers beyond the limit: 431 with a detail, whether they arrive at once or in pieces', async () => {
    const request = `GET /v1/markets HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`;
    const pieces = request.match(/[\s\S]{1,4096}/g)!;
    for (const [how, parts, gapMs] of [
      ['at once', [request], 0],
      ['in pieces', pieces, 5],
    ] as const) {
      const { text, closed } = await rawExchange([...parts], { gapMs });
      expect(closed, how).toBe(true);
      const a = jsonAnswer(text);
      expect(a.status, how).toBe(431);
      expect(JSON.parse(a.body).detail, how).toMatch(/^Request header fields too large: /);
    }
  });

  it('a NUL in the path, and a request line that is not HTTP: 400 with a detail', async () => {
    for (const line of ['GET /v1/mar\u0000kets HTTP/1.1', 'GET /v1/\u0000 HTTP/1.1', 'HELLO', 'GET /v1/markets HTTP/9.9']) {
      const { text } = await rawExchange([`${line}\r\nHost: x\r\n\r\n`]);
      const a = jsonAnswer(text);
      expect(a.status, JSON.stringify(line)).toBe(400);
      expect(JSON.parse(a.body).detail, JSON.stringify(line)).toMatch(/^Malformed HTTP request: \S/);
    }
  });

  it('the server goes on answering', async () => {
    expect((await fetch(`${srv.url}/health`)).status).toBe(200);
  });
});
