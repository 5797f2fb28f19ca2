import type { Request, Response } from 'express';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { deliverWebhook, LOCAL_PROVIDER, LOCAL_WEBHOOK_PATH, newEvent } from '../../payments/local.js';
import { cancelCheckout, getCheckout, type CheckoutRow } from '../../state/billing.js';
import { NotFound } from '../../errors.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import { checkoutPageCsp, closedCheckoutPage, notConfirmedPage, openCheckoutPage } from '../pages/checkout.js';

/**
 * The local provider's hosted checkout page. The checkout id in the URL is the credential (24 random hex
 * digits, like a hosted provider's session URL); the page never moves money itself. "Pay" makes the provider
 * side deliver a signed webhook to pmlake over HTTP, and only that webhook credits or activates. The page
 * confirms without taking any money, so it exists only when PMLAKE_PAYMENT_PROVIDER=local (404 otherwise).
 * The HTML is src/http/pages/checkout.ts.
 */
const Params = z.object({ checkout_id: z.string().regex(/^chk_[0-9a-f]{24}$/, 'not a checkout id') });

function sendPage(res: Response, status: number, html: string, returnUrls: string[] = []): void {
  res
    .status(status)
    .setHeader('Content-Type', 'text/html; charset=utf-8')
    .setHeader('Content-Security-Policy', checkoutPageCsp(returnUrls))
    .setHeader('Cache-Control', 'no-store')
    .send(html);
}

async function load(ctx: AppContext, { checkout_id }: z.infer<typeof Params>): Promise<CheckoutRow> {
  if (ctx.config.payments.provider !== LOCAL_PROVIDER) throw new NotFound('Not Found');
  const co = await getCheckout(ctx.state, checkout_id);
  // Only the local provider's own sessions have a page here (a Paddle checkout is paid on Paddle's page).
  if (!co || co.provider !== LOCAL_PROVIDER) throw new NotFound('Checkout not found');
  return co;
}

/** Where the provider side delivers webhooks: the public URL, else this very server's own listening socket. */
function webhookUrl(req: Request, ctx: AppContext): string {
  if (ctx.config.publicUrl) return `${ctx.config.publicUrl.replace(/\/+$/, '')}${LOCAL_WEBHOOK_PATH}`;
  let host = (req.socket.localAddress ?? '127.0.0.1').replace(/^::ffff:/, '');
  if (host.includes(':')) host = `[${host}]`;
  return `http://${host}:${req.socket.localPort}${LOCAL_WEBHOOK_PATH}`;
}

function withCheckoutId(url: string, id: string): string {
  const u = new URL(url);
  u.searchParams.set('checkout_id', id);
  return u.toString();
}

export const localCheckoutRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/billing/checkout/local/:checkout_id',
    cost: 'cheap',
    auth: 'public',
    tag: 'Billing',
    summary: 'Hosted checkout page of the local payment provider',
    params: Params,
    handler: getLocalCheckout,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/billing/checkout/local/:checkout_id/confirm',
    cost: 'cheap',
    auth: 'public',
    tag: 'Billing',
    summary: 'Confirm a local checkout: the provider sends its signed webhook, then returns to success_url',
    params: Params,
    handler: confirmLocalCheckout,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/billing/checkout/local/:checkout_id/cancel',
    cost: 'cheap',
    auth: 'public',
    tag: 'Billing',
    summary: 'Abandon a local checkout and return to cancel_url',
    params: Params,
    handler: cancelLocalCheckout,
  }),
];

async function getLocalCheckout({ params, res }: RouteInput<{ params: typeof Params }>, ctx: AppContext) {
  const co = await load(ctx, params);
  if (co.status !== 'open') sendPage(res, 200, closedCheckoutPage(co));
  else sendPage(res, 200, openCheckoutPage(co), [co.success_url, co.cancel_url]);
  return undefined;
}

async function confirmLocalCheckout({ params, req, res }: RouteInput<{ params: typeof Params }>, ctx: AppContext) {
  const co = await load(ctx, params);
  if (co.status === 'open') {
    const event = newEvent('checkout.completed', co.id);
    const out = await deliverWebhook(webhookUrl(req, ctx), ctx.config.webhookSecret, event).catch((err: unknown) => {
      req.log.error({ err, checkout: co.id }, 'local provider could not deliver its webhook');
      return { status: 0, body: '' };
    });
    if (out.status < 200 || out.status >= 300) {
      sendPage(res, 502, notConfirmedPage(out.status));
      return undefined;
    }
  }
  res.redirect(303, withCheckoutId(co.success_url, co.id));
  return undefined;
}

async function cancelLocalCheckout({ params, res }: RouteInput<{ params: typeof Params }>, ctx: AppContext) {
  const co = await load(ctx, params);
  await cancelCheckout(ctx.state, co.id);
  res.redirect(303, withCheckoutId(co.cancel_url, co.id));
  return undefined;
}
