import { z } from 'zod';
import { defineRoute, type Route } from '../../src/http/route.js';
import { routes } from '../../src/http/routes.js';

/** Test-only routes: one that answers, one that fails with a 5xx, one that pulls through the real meter. */
const PullQuery = z.object({
  dataset: z.string().default('trades'),
  kind: z.enum(['download', 'export']).default('download'),
  bytes: z.coerce.number().default(1000),
  actual: z.coerce.number().optional(),
  fail: z.coerce.number().default(0),
});
export const limitTestRoutes: Route[] = [
  { method: 'get', path: '/test/ok', cost: 'cheap', auth: 'key', tag: 't', summary: 'ok', handler: async () => ({ ok: true }) },
  { method: 'get', path: '/test/public', cost: 'cheap', auth: 'public', tag: 't', summary: 'public', handler: async () => ({ ok: true }) },
  { method: 'get', path: '/test/unlimited', cost: 'cheap', auth: 'public', limit: 'none', tag: 't', summary: 'none', handler: async () => ({ ok: true }) },
  {
    method: 'get',
    path: '/test/boom',
    cost: 'cheap',
    auth: 'key',
    tag: 't',
    summary: 'fails',
    handler: async () => {
      throw new Error('simulated failure');
    },
  },
  { method: 'post', path: '/test/order', cost: 'cheap', auth: 'key', limit: 'orders', tag: 't', summary: 'order', handler: async () => ({ ok: true }) },
  defineRoute({
    method: 'get',
    path: '/test/pull',
    cost: 'cheap',
    auth: 'key',
    scope: 'download',
    limit: 'download',
    tag: 't',
    summary: 'pull',
    query: PullQuery,
    handler: async ({ query: q, req }, ctx) => {
      const ticket = await ctx.meter.begin(req.principal!, {
        kind: q.kind,
        dataset: q.dataset,
        description: `test ${q.dataset}`,
        estimatedBytes: q.bytes,
        format: 'csv',
        marketId: '123',
        fileName: 'x.csv',
      });
      if (q.fail) {
        await ticket.refund('simulated failure');
        throw new Error('simulated pull failure');
      }
      const sent = q.actual ?? q.bytes;
      await ticket.commit({ bytes: sent, rows: 7 });
      return { ticket: ticket.id, sent };
    },
  }),
  ...routes,
];
