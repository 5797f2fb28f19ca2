import type { Request, Response } from 'express';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { deliverWebhook, LOCAL_PROVIDER, LOCAL_WEBHOOK_PATH, newEvent } from '../../payments/local.js';
import { cancelCheckout, getCheckout, type CheckoutRow } from '../../state/billing.js';
import { NotFound } from '../../errors.js';
import type { Route } from '../route.js';

/**
 * The local provider's hosted checkout page. The checkout id in the URL is the credential (24 random hex
 * digits, like a hosted provider's session URL); the page never moves money itself. "Pay" makes the provider
 * side deliver a signed webhook to pmlake over HTTP, and only that webhook credits or activates. The page
 * confirms without taking any money, so it exists only when PMLAKE_PAYMENT_PROVIDER=local (404 otherwise).
 */
const Params = z.object({ checkout_id: z.string().regex(/^chk_[0-9a-f]{24}$/, 'not a checkout id') });

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(res: Response, status: number, title: string, body: string, returnUrls: string[] = []): void {
  // form-action also governs the redirect after a form post: allow the session's own return origins.
  const origins = returnUrls.map((u) => new URL(u).origin).join(' ');
  res
    .status(status)
    .setHeader('Content-Type', 'text/html; charset=utf-8')
    // The page posts only to itself and loads nothing: lock it down.
    .setHeader('Content-Security-Policy', `default-src 'none'; style-src 'unsafe-inline'; form-action 'self' ${origins}; base-uri 'none'; frame-ancestors 'none'`)
    .setHeader('Cache-Control', 'no-store')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font-size:1rem;padding:.5rem 1.25rem;margin-right:.5rem}.muted{color:#666}</style>
</head><body>${body}</body></html>`,
    );
}

function what(co: CheckoutRow): string {
  const amount = `${(co.amount_cents / 100).toFixed(2)} USD`;
  return co.kind === 'credits' ? `Buy ${amount} of credits` : `${co.tier} subscription (${co.billing_period}): ${amount}`;
}

function load(ctx: AppContext, res: Response): CheckoutRow {
  if (ctx.config.payments.provider !== LOCAL_PROVIDER) throw new NotFound('Not Found');
  const { checkout_id } = res.locals.params as z.infer<typeof Params>;
  const co = getCheckout(ctx.state, checkout_id);
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
  {
    method: 'get',
    path: '/v1/billing/checkout/local/:checkout_id',
    cost: 'cheap',
    auth: 'public',
    tag: 'Billing',
    summary: 'Hosted checkout page of the local payment provider',
    params: Params,
    handler: async (_req, res, ctx) => {
      const co = load(ctx, res);
      if (co.status !== 'open') {
        page(res, 200, 'Checkout closed', `<h1>Checkout ${esc(co.status)}</h1><p class="muted">${esc(what(co))}</p>`);
        return undefined;
      }
      page(
        res,
        200,
        'pmlake checkout',
        `<h1>pmlake checkout</h1><p id="summary">${esc(what(co))}</p>
<p class="muted">Local test provider: no card is charged. Paying sends a signed webhook to pmlake.</p>
<form method="post" action="/v1/billing/checkout/local/${esc(co.id)}/confirm" style="display:inline"><button id="pay" type="submit">Pay ${esc((co.amount_cents / 100).toFixed(2))} USD</button></form>
<form method="post" action="/v1/billing/checkout/local/${esc(co.id)}/cancel" style="display:inline"><button id="cancel" type="submit">Cancel</button></form>`,
        [co.success_url, co.cancel_url],
      );
      return undefined;
    },
  },
  {
    method: 'post',
    path: '/v1/billing/checkout/local/:checkout_id/confirm',
    cost: 'cheap',
    auth: 'public',
    tag: 'Billing',
    summary: 'Confirm a local checkout: the provider sends its signed webhook, then returns to success_url',
    params: Params,
    handler: async (req, res, ctx) => {
      const co = load(ctx, res);
      if (co.status === 'open') {
        const event = newEvent('checkout.completed', co.id);
        const out = await deliverWebhook(webhookUrl(req, ctx), ctx.config.webhookSecret, event).catch((err: unknown) => {
          req.log.error({ err, checkout: co.id }, 'local provider could not deliver its webhook');
          return { status: 0, body: '' };
        });
        if (out.status < 200 || out.status >= 300) {
          page(res, 502, 'Payment not confirmed', `<h1>Payment not confirmed</h1><p>The payment provider could not notify pmlake (status ${out.status}). Nothing was charged; try again.</p>`);
          return undefined;
        }
      }
      res.redirect(303, withCheckoutId(co.success_url, co.id));
      return undefined;
    },
  },
  {
    method: 'post',
    path: '/v1/billing/checkout/local/:checkout_id/cancel',
    cost: 'cheap',
    auth: 'public',
    tag: 'Billing',
    summary: 'Abandon a local checkout and return to cancel_url',
    params: Params,
    handler: async (_req, res, ctx) => {
      const co = load(ctx, res);
      cancelCheckout(ctx.state, co.id);
      res.redirect(303, withCheckoutId(co.cancel_url, co.id));
      return undefined;
    },
  },
];
