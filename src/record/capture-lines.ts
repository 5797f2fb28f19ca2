/**
 * The lines and file names of the capture format (docs/capture-format.md), built in one place so the writer,
 * the recorder and the recovery agree byte for byte. Each builder returns one line without its `\n`.
 */
export const CAPTURE_FORMAT = 1;
export const CAPTURE_SUFFIX = '.capture.jsonl';
export const OPEN_PREFIX = '.open-';
export const CLOSED_PREFIX = 'market-';

/** Query parameters that carry a credential (a replay's `api_key`, a provider's token). */
const SECRET_PARAM = /^(api[_-]?key|key|token|access[_-]?token|secret|password|auth)$/i;

/**
 * The URL as files and logs may show it: credentials replaced by `***` (a password in the authority, a key in
 * the query), since capture files outlive the recorder and travel with the data. Not a URL: returned as is.
 */
export function redactUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url;
  }
  const secrets = [...u.searchParams.keys()].filter((k) => SECRET_PARAM.test(k));
  // A URL without credentials is kept exactly as given (URL would normalise it).
  if (!u.password && secrets.length === 0) return url;
  if (u.password) u.password = '***';
  for (const k of secrets) u.searchParams.set(k, '***');
  return u.toString();
}

export function startLine(recvMs: number, recorder: string, session: string, url: string): string {
  return JSON.stringify({ recv_ms: recvMs, event: 'start', format: CAPTURE_FORMAT, recorder, session, url: redactUrl(url) });
}

export function assetsLine(recvMs: number, conn: number, assets: readonly string[]): string {
  return JSON.stringify({ recv_ms: recvMs, event: 'assets', conn, assets });
}

/** `frame` is the frame's text as a JSON string: JSON.parse of the line gives the received text back exactly. */
export function frameLine(recvMs: number, conn: number, text: string): string {
  return `{"recv_ms":${recvMs},"conn":${conn},"frame":${JSON.stringify(text)}}`;
}

export function subscribeLine(recvMs: number, conn: number, assets: readonly string[]): string {
  return JSON.stringify({ recv_ms: recvMs, event: 'subscribe', conn, assets });
}

export function disconnectLine(recvMs: number, conn: number, code: number, reason: string): string {
  return JSON.stringify({ recv_ms: recvMs, event: 'disconnect', conn, code, reason });
}

export function outageLine(recvMs: number, fromMs: number, toMs: number, assets: readonly string[], reason: string): string {
  return JSON.stringify({ recv_ms: recvMs, event: 'outage', from_ms: fromMs, to_ms: toMs, assets, reason });
}

export function stopLine(recvMs: number): string {
  return JSON.stringify({ recv_ms: recvMs, event: 'stop' });
}

export function openFileName(recorder: string, session: string): string {
  return `${OPEN_PREFIX}${recorder}-${session}${CAPTURE_SUFFIX}`;
}

/** `market-<YYYYMMDDTHHMMSS>Z-<recorder>-<session8>.capture.jsonl`, the UTC start of the file's period. */
export function closedFileName(periodStartMs: number, recorder: string, session: string): string {
  const stamp = new Date(periodStartMs).toISOString().slice(0, 19).replace(/[-:]/g, '');
  return `${CLOSED_PREFIX}${stamp}Z-${recorder}-${session.slice(0, 8)}${CAPTURE_SUFFIX}`;
}

/** The start of the rotation period holding `ms`: periods are multiples of the period since the epoch. */
export function periodStart(ms: number, rotateSeconds: number): number {
  const p = rotateSeconds * 1000;
  return Math.floor(ms / p) * p;
}
