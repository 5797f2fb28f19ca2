/**
 * One `Range: bytes=…` request header against a file of `size` bytes (RFC 9110 §14): a byte range to send
 * (206), 'unsatisfiable' (416), or null for the whole file (200) — no header, a syntax we do not serve
 * (several ranges, other units: ignoring Range is allowed), or an If-Range that no longer matches.
 */
export type ByteRange = { start: number; end: number };

export function parseRange(header: string | undefined, size: number, ifRange?: string, etag?: string): ByteRange | 'unsatisfiable' | null {
  if (!header) return null;
  // If-Range with a different validator: the client's partial copy is of another file, send it all.
  if (ifRange !== undefined && ifRange !== etag) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    // Suffix range: the last N bytes.
    const n = Number(m[2]);
    if (n === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (m[2] !== '' && Number(m[2]) < start) return null; // invalid range: ignored, like a syntax error
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}
