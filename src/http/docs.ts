import { defineRoute, type Route, type RouteInput } from './route.js';
import { docsPage } from './pages/docs.js';

/** GET /docs: the human-readable API documentation, rendered in the browser from /v1/openapi.json. */
export const docsRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/docs',
    cost: 'cheap',
    auth: 'public',
    limit: 'none',
    tag: 'meta',
    summary: 'Human-readable API documentation (HTML)',
    produces: ['text/html'],
    handler: sendDocs,
  }),
];

async function sendDocs({ res }: RouteInput) {
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  // The page's own inline script and style, and fetches of this origin only (the OpenAPI document, "try it");
  // images from data: for the empty favicon (else the browser asks /favicon.ico, a 404 on the console).
  res.setHeader(
    'Content-Security-Policy',
    "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'",
  );
  res.setHeader('Cache-Control', 'public, max-age=300');
  res.send(docsPage());
  return undefined;
}
