/**
 * The Content-Disposition of every file pmlake hands out: downloads, bulk ZIPs, export files behind pmlake's own
 * link, and the S3 store's presigned links (`ResponseContentDisposition`). File names are built from validated ids
 * and are plain ASCII, so the header is `attachment; filename="<name>"` alone (RFC 6266 §4.1). Clients read it in
 * simpler ways than RFC 6266 does: the official Python SDK takes everything after the first `filename=`, less
 * quotes, so a `filename*` after it became part of the saved name (`x.csv"; filename*=UTF-8''x.csv`).
 *
 * A name beyond that alphabet (none is built today) carries `filename*` (RFC 8187) first and an ASCII `filename`
 * last: RFC 6266 parsers prefer `filename*` wherever it stands (§4.3), and a client splitting on the first
 * `filename=` (`filename*=` does not contain it) still gets a whole, clean fallback name.
 */
export function contentDisposition(fileName: string): string {
  const ascii = fileName.replace(/[^A-Za-z0-9._-]/g, '_');
  if (ascii === fileName) return `attachment; filename="${fileName}"`;
  return `attachment; filename*=UTF-8''${extValue(fileName)}; filename="${ascii}"`;
}

/** RFC 8187 value chars: encodeURIComponent leaves `'()*` bare, which attr-char does not allow. */
function extValue(s: string): string {
  return encodeURIComponent(s).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
