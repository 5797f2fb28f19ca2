import { z } from 'zod';
import { listOrders, orderItems } from '../../state/billing.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';
import { OrderResponse } from '../account-schemas.js';
import { usagePricing } from '../billing/pricing.js';
import { orderView } from './views.js';

/** GET /v1/orders/estimate (the constants a client prices an order with) and GET /v1/orders (the caller's orders). */

const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(20) });

export const orderListRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/orders/estimate',
    cost: 'cheap',
    auth: 'key',
    tag: 'Orders',
    summary: 'Constants for a live order-cost estimate: rate per MB, bytes per row, minimum order',
    handler: estimateOrders,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/orders',
    cost: 'cheap',
    auth: 'key',
    tag: 'Orders',
    summary: "The caller's orders, newest first",
    query: ListQuery,
    response: z.array(OrderResponse),
    handler: getOrders,
  }),
];

async function estimateOrders() {
  return usagePricing();
}

async function getOrders({ query: q, req }: RouteInput<{ query: typeof ListQuery }>, ctx: AppContext) {
  const orders = await listOrders(ctx.state, req.principal!.userId, q.limit);
  return Promise.all(orders.map(async (o) => orderView(o, await orderItems(ctx.state, o.id))));
}
