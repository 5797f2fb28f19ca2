import type { Request, Response } from 'express';
import type { Config } from '../config.js';
import { publicBase } from './public-url.js';

/**
 * The next page of a list (RFC 8288): a list that stops at its limit while more rows match answers
 * `Link: <url>; rel="next"`, and no such header once it is done. Following the URLs from the first page to
 * the last one gives every row exactly once, in the list's order.
 *
 * The URL is absolute, on the service's public base (./public-url.ts, as checkout and export links are: never a
 * client's Host unless the operator allowed it), so a client follows it as given. It is the request's own
 * query string with the paging parameters changed (`changes`; null removes one); everything else the client
 * sent is kept as it sent it. `path` points at another endpoint serving the same list (recent trades continue
 * on /v1/trades).
 */
export type LinkChanges = Readonly<Record<string, string | number | null>>;

export function setNextLink(req: Request, res: Response, config: Config, changes: LinkChanges, path?: string): void {
  res.setHeader('Link', `<${nextUrl(req, config, changes, path)}>; rel="next"`);
}

export function nextUrl(req: Request, config: Config, changes: LinkChanges, path?: string): string {
  // Only the path and query of the request line are read here (the base is publicBase's).
  const here = new URL(req.originalUrl, 'http://request.invalid');
  const params = path === undefined ? here.searchParams : new URLSearchParams();
  for (const [k, v] of Object.entries(changes)) {
    if (v === null) params.delete(k);
    else params.set(k, String(v));
  }
  const target = new URL(path ?? here.pathname, 'http://request.invalid');
  const query = params.toString();
  return `${publicBase(config, req)}${target.pathname}${query ? `?${query}` : ''}`;
}

/** The description of the header, for the OpenAPI document of every paged list. */
export const LINK_HEADER_DOC =
  'RFC 8288 `<url>; rel="next"`: sent when the list stopped at its limit while more rows match, absent on the last page. The URL is absolute (the service\'s public base) and continues exactly where this page stopped: following it page after page gives every row once, in order.';
