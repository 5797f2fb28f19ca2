/**
 * The home page a browser gets at GET / (src/http/public/status.ts negotiates it; API clients keep the JSON):
 * what pmlake is and links to its documents. A pure function of the root's own fields, so the page and the JSON
 * name the same places. No script, nothing from another origin.
 */
export type HomeLinks = { docs: string; charts: string; status: string; openapi: string; health: string };
export type HomeLake = { version: number; publishedAt: string | null };

/** No script, no fetch, no form: only its inline style and the empty favicon. */
export const HOME_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function homePage(version: string, links: HomeLinks, lake: HomeLake): string {
  const item = (id: string, href: string, name: string, what: string) =>
    `<li><a id="${id}" href="${esc(href)}">${esc(name)}</a> <span class="muted">${esc(href)}</span><br>${esc(what)}</li>`;
  const served =
    lake.version > 0
      ? `Serving lake version ${lake.version}${lake.publishedAt ? `, published ${esc(lake.publishedAt)}` : ''}.`
      : 'No lake version published yet: the API answers, the data comes with the first ingest.';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pmlake</title>
<link rel="icon" href="data:,">
<style>
  body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #fafbfc; }
  header { background: #1b1f24; color: #fff; padding: 10px 20px; display: flex; gap: 12px; align-items: baseline; }
  header h1 { margin: 0; font-size: 20px; }
  main { max-width: 46rem; padding: 10px 20px 40px; }
  ul { list-style: none; padding: 0; }
  li { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: 10px 14px; margin: 10px 0; }
  li a { font-weight: 600; font-size: 16px; color: #0969da; }
  .muted { color: #57606a; font-size: 13px; }
  code { background: #eff1f3; padding: 1px 4px; border-radius: 4px; }
</style>
</head>
<body>
<header><h1>pmlake</h1><span class="muted" style="color:#9ea7b3">API ${esc(version)}</span></header>
<main>
<p>Historical prediction-market data (markets, trades, OHLCV candles, order books, the raw level-2 tape) over an HTTP API,
as JSON, CSV or Parquet downloads, or exports built in the background. Data endpoints take an API key in the <code>X-API-Key</code> header.</p>
<ul>
${item('docs', links.docs, 'API documentation', 'Every endpoint with its parameters and answers; try them with your key.')}
${item('charts', links.charts, 'Charts', "A market's candles, top of book and order-book depth at any instant, drawn from the API with your key.")}
${item('status', links.status, 'Status', 'Whether the API answers and which lake version it serves (JSON).')}
${item('openapi', links.openapi, 'OpenAPI document', 'The machine-readable description of the API (OpenAPI 3.1, JSON), for generated clients.')}
</ul>
<p class="muted">${served} Health probe: <a href="${esc(links.health)}">${esc(links.health)}</a>. API clients get this root as JSON
(<code>Accept: application/json</code>, <code>*/*</code> or no Accept header).</p>
</main>
</body>
</html>
`;
}
