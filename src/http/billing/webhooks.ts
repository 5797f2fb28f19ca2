import { LOCAL_PROVIDER, LOCAL_WEBHOOK_PATH, verifyLocalWebhook } from '../../payments/local.js';
import { PADDLE_PROVIDER, PADDLE_WEBHOOK_PATH, parsePaddleEvent } from '../../payments/paddle.js';
import { PADDLE_SIGNATURE_HEADER, verifyPaddleSignature } from '../../payments/paddle-signature.js';
import { SIGNATURE_HEADER } from '../../payments/signature.js';
import { applyCheckoutEvent } from '../../state/billing.js';
import { BadRequest, NotFound } from '../../errors.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';

/**
 * Payment-provider webhooks. A webhook exists only where its provider is configured (404 otherwise, as for
 * any unknown path). The signature is checked over the raw request bytes (kept by app.ts for
 * /v1/billing/webhook/*) before anything is parsed or touched; the event then applies exactly once.
 */
export const webhookRoutes: Route[] = [
  defineRoute({
    method: 'post',
    path: LOCAL_WEBHOOK_PATH,
    cost: 'cheap',
    auth: 'public',
    // A provider retries on failure; throttling it would only delay money.
    limit: 'none',
    tag: 'Billing',
    summary: 'Webhook of the built-in local payment provider (only when PMLAKE_PAYMENT_PROVIDER=local; HMAC-SHA256 signed, timestamped)',
    handler: receiveLocalWebhook,
  }),
  defineRoute({
    method: 'post',
    path: PADDLE_WEBHOOK_PATH,
    cost: 'cheap',
    auth: 'public',
    limit: 'none',
    tag: 'Billing',
    summary: 'Paddle Billing webhook (Paddle-Signature: ts=…;h1=…): transaction.completed credits or activates the checkout it names',
    handler: receivePaddleWebhook,
  }),
];

async function receiveLocalWebhook({ req }: RouteInput, ctx: AppContext) {
  if (ctx.config.payments.provider !== LOCAL_PROVIDER) throw new NotFound('Not Found');
  const event = verifyLocalWebhook(ctx.config.webhookSecret, req.rawBody ?? Buffer.alloc(0), req.header(SIGNATURE_HEADER));
  if (!event) {
    req.log.warn({ provider: LOCAL_PROVIDER }, 'webhook rejected: bad signature or payload');
    throw new BadRequest('Invalid webhook signature');
  }
  const out = await applyCheckoutEvent(ctx.state, { provider: LOCAL_PROVIDER, eventId: event.id, type: event.type, checkoutId: event.checkout_id });
  req.log.info({ event: event.id, checkout: event.checkout_id, outcome: out.outcome }, 'webhook processed');
  return { received: true, event_id: event.id, outcome: out.outcome };
}

async function receivePaddleWebhook({ req }: RouteInput, ctx: AppContext) {
  const paddle = ctx.config.payments.paddle;
  // Served wherever a destination secret is configured, even after switching provider: late events still land.
  if (!paddle.webhookSecret) throw new NotFound('Not Found');
  const raw = req.rawBody ?? Buffer.alloc(0);
  const signed = verifyPaddleSignature(paddle.webhookSecret, raw, req.header(PADDLE_SIGNATURE_HEADER), { toleranceSeconds: paddle.toleranceSeconds });
  const event = signed ? parsePaddleEvent(raw) : null;
  if (!event) {
    req.log.warn({ provider: PADDLE_PROVIDER, signed }, 'webhook rejected: bad signature or payload');
    throw new BadRequest(signed ? 'Invalid webhook payload' : 'Invalid webhook signature');
  }
  // Paddle sends every subscribed event type; only a completed transaction moves anything. The others are
  // acknowledged (200) so Paddle does not retry them.
  if (event.kind === 'other' || !event.checkoutId) {
    req.log.info({ event: event.eventId, type: event.eventType }, 'paddle webhook ignored');
    return { received: true, event_id: event.eventId, outcome: 'ignored' };
  }
  const out = await applyCheckoutEvent(ctx.state, {
    provider: PADDLE_PROVIDER,
    eventId: event.eventId,
    type: 'checkout.completed',
    providerType: event.eventType,
    checkoutId: event.checkoutId,
    providerRef: event.transactionId,
  });
  const log = out.outcome === 'provider_ref_mismatch' || out.outcome === 'unknown_checkout' ? req.log.warn.bind(req.log) : req.log.info.bind(req.log);
  log({ event: event.eventId, checkout: event.checkoutId, transaction: event.transactionId, outcome: out.outcome }, 'paddle webhook processed');
  return { received: true, event_id: event.eventId, outcome: out.outcome };
}
