/**
 * The /charts page: a market's candles at any timeframe with volume, its top of book, and the order-book depth
 * at any instant the user scrubs to. Self-contained (no CDN: the service may run without internet): the page,
 * its script and the charting library (lightweight-charts, from node_modules) are all served by pmlake
 * (src/http/charts-page.ts). It reads only the public API, with the key the user types (kept in the browser's
 * localStorage, never in a URL), sent as X-API-Key. The view (market, outcome, timeframe, instant) is the URL's query.
 * Plain JS without a build step; every API text goes through textContent, never innerHTML. The chart's data is
 * kept on `window.__chartData` and the depth shown on `window.__depth`, so a browser test can compare them with
 * the API's own answers.
 *
 * Candles come from /v1/trades/ohlcv, or (Source "UDF datafeed") through a small client of pmlake's TradingView
 * UDF routes that speaks the protocol as the charting library's UDFCompatibleDatafeed does: config once, then
 * symbols?symbol= once per symbol (cached, as the library caches symbol info), then history with from, to and
 * countback, following `nextTime` on no_data. The timeframe box then takes a UDF resolution (7, 60, 2D, 1W, 30S).
 * What that client requested and received is kept on `window.__udf`.
 *
 * Under the chart, the tape's coverage of the picked outcome per UTC day of the candles' window (at most the last
 * 366 days), from GET /v1/markets/{market_id}/coverage: one coloured cell per day the tape has (verified, unverified,
 * degraded, missing), kept on `window.__coverage`; the depth view says whether the book shown is verified.
 *
 * The script is ./charts-script.ts.
 */
export function chartsPage(): string {
  return PAGE;
}

/**
 * Scripts from this origin only (the page's own file and the library), fetches of this origin only. Inline
 * styles are allowed because the library positions its canvases through style attributes; images from data:
 * for the empty favicon (else the browser asks /favicon.ico, a 404 on the console).
 */
export const CHARTS_CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pmlake charts</title>
<link rel="icon" href="data:,">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #fafbfc; }
  header { background: #1b1f24; color: #fff; padding: 10px 20px; display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap; }
  header h1 { margin: 0; font-size: 18px; }
  header a { color: #9ecbff; }
  main { padding: 10px 20px 40px; }
  .bar { display: flex; gap: 10px; flex-wrap: wrap; align-items: center; margin: 6px 0; }
  input, select, button { font: inherit; padding: 3px 6px; }
  #results { display: flex; flex-direction: column; gap: 2px; max-height: 160px; overflow: auto; }
  #results button { text-align: left; background: #fff; border: 1px solid #d0d7de; cursor: pointer; }
  #results button:hover { background: #f0f6ff; }
  #title { font-weight: 600; margin: 8px 0 2px; }
  #coverage, #status { color: #57606a; }
  #status.err { color: #cf222e; }
  .grid { display: grid; grid-template-columns: minmax(0, 3fr) minmax(240px, 1fr); gap: 12px; }
  @media (max-width: 800px) { .grid { grid-template-columns: minmax(0, 1fr); } }
  #chart { height: 420px; background: #fff; border: 1px solid #d0d7de; }
  #depth { width: 100%; height: 420px; background: #fff; border: 1px solid #d0d7de; display: block; }
  #scrub { width: 100%; }
  .legend span { margin-right: 12px; }
  .bid { color: #1a7f37; } .ask { color: #cf222e; }
  #tape { display: flex; gap: 1px; min-height: 14px; margin: 4px 0; }
  #tape span { flex: 1; min-width: 2px; height: 14px; }
  #tape .verified { background: #1a7f37; } #tape .unverified { background: #8c959f; }
  #tape .degraded { background: #bf8700; } #tape .missing { background: #cf222e; }
  #tapeinfo { color: #57606a; font-size: 12px; }
</style>
</head>
<body>
<header><h1>pmlake charts</h1><a href="/">home</a><a href="/docs">API docs</a></header>
<main>
  <div class="bar">
    <label>API key <input id="key" type="password" size="40" autocomplete="off" placeholder="X-API-Key"></label>
    <label>Market <input id="search" size="36" placeholder="search questions…"></label>
  </div>
  <div id="results"></div>
  <div id="title"></div>
  <div id="coverage"></div>
  <div class="bar">
    <label>Outcome <select id="outcome"></select></label>
    <label>Source <select id="source"><option value="ohlcv">/v1/trades/ohlcv</option><option value="udf">UDF datafeed</option></select></label>
    <label>Timeframe <input id="timeframe" size="6" value="1h" list="resolutions" title="30s, 1m, 7m, 1h, 4h, 1d, 1w, … (UDF: 7, 60, 2D, 1W, 30S, …)"></label>
    <datalist id="resolutions"></datalist>
    <button id="load">Load</button>
    <span id="status"></span>
  </div>
  <div class="grid">
    <div>
      <div id="chart"></div>
      <div id="tape" title="the tape's coverage per UTC day"></div>
      <div id="tapeinfo"></div>
      <div class="legend"><span>candles + volume</span><span class="bid">— best bid</span><span class="ask">— best ask</span><span>(click the chart to see the book then)</span></div>
    </div>
    <div>
      <canvas id="depth"></canvas>
      <div id="depthinfo"></div>
    </div>
  </div>
  <div class="bar"><label style="flex:1">Book at <span id="at"></span><br><input id="scrub" type="range" min="0" max="0" step="1" value="0"></label></div>
</main>
<script src="/charts/lightweight-charts.js"></script>
<script src="/charts/charts.js"></script>
</body>
</html>
`;
