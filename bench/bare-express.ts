import express from 'express';
import type { AddressInfo } from 'node:net';

/**
 * The http-small baseline: a bare Express 5 app with one route returning a constant JSON object of about
 * the size of a Market, on the same machine and Node as pmlake. Started as a child by bench/scenarios/http.ts.
 */
const body = {
  id: '512345',
  question: 'Will the Kansas City Chiefs win Super Bowl 2026?',
  outcomes: ['Yes', 'No'],
  outcome_prices: [0.12, 0.88],
  active: true,
  closed: false,
};
const app = express();
app.disable('x-powered-by');
app.get('/v1/markets/:id', (_req, res) => {
  res.json(body);
});
const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`bare express listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
