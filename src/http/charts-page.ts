import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { Response } from 'express';
import { defineRoute, type Route, type RouteInput } from './route.js';
import { CHARTS_CSP, chartsPage } from './pages/charts.js';
import { chartsScript } from './pages/charts-script.js';

/**
 * GET /charts: the chart page (src/http/pages/charts.ts), its script, and the charting library it draws with,
 * vendored from node_modules (lightweight-charts' standalone build, which defines window.LightweightCharts):
 * no CDN, the service may run without internet. All public: the page holds no data; it reads the API with the
 * key the user types.
 */

let library: string | undefined;
/** Read once, on first request: the installed package's file does not change while the process runs. */
function chartingLibrary(): string {
  if (library === undefined) {
    const pkg = createRequire(import.meta.url).resolve('lightweight-charts/package.json');
    library = fs.readFileSync(path.join(path.dirname(pkg), 'dist', 'lightweight-charts.standalone.production.js'), 'utf8');
  }
  return library;
}

function send(res: Response, type: string, body: string): undefined {
  res.setHeader('Content-Type', type);
  res.setHeader('Content-Security-Policy', CHARTS_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Cache-Control', 'public, max-age=300');
  res.send(body);
  return undefined;
}

const asset = { method: 'get', cost: 'cheap', auth: 'public', limit: 'none', tag: 'meta' } as const;

export const chartsPageRoutes: Route[] = [
  defineRoute({
    ...asset,
    path: '/charts',
    summary: 'Charts of a market: candles with volume, top of book, order-book depth at any instant (HTML)',
    produces: ['text/html'],
    handler: sendChartsPage,
  }),
  defineRoute({
    ...asset,
    path: '/charts/charts.js',
    summary: "The charts page's script",
    produces: ['text/javascript'],
    handler: sendChartsScript,
  }),
  defineRoute({
    ...asset,
    path: '/charts/lightweight-charts.js',
    summary: 'The charting library the charts page uses (TradingView lightweight-charts, Apache-2.0), served locally',
    produces: ['text/javascript'],
    handler: sendChartingLibrary,
  }),
];

async function sendChartsPage({ res }: RouteInput) {
  return send(res, 'text/html; charset=utf-8', chartsPage());
}

async function sendChartsScript({ res }: RouteInput) {
  return send(res, 'text/javascript; charset=utf-8', chartsScript());
}

async function sendChartingLibrary({ res }: RouteInput) {
  return send(res, 'text/javascript; charset=utf-8', chartingLibrary());
}
