import { LOCAL_WEBHOOK_PATH, localProvider } from '../payments/local.js';
import { SIGNATURE_HEADER } from '../payments/signature.js';
import { applyCheckoutEvent } from '../state/billing.js';
import { BadRequest } from './errors.js';
import type { Route } from './route.js';

/**
 * Payment-provider webhooks. The signature is checked over the raw request bytes (kept by app.ts for
 * /v1/billing/webhook/*) before anything is parsed or touched; the event then applies exactly once.
 */
export const webhookRoutes: Route[] = [
  {
    method: 'post',
    path: LOCAL_WEBHOOK_PATH,
    auth: 'public',
    // A provider retries on failure; throttling it would only delay money.
    limit: 'none',
    tag: 'Billing',
    summary: 'Webhook of the built-in local payment provider (HMAC-SHA256 signed, timestamped)',
    handler: async (req, _res, ctx) => {
      const provider = localProvider(ctx.config.webhookSecret);
      const raw = req.rawBody ?? Buffer.alloc(0);
      const event = provider.verifyWebhook(raw, req.header(SIGNATURE_HEADER));
      if (!event) {
        req.log.warn({ provider: provider.name }, 'webhook rejected: bad signature or payload');
        throw new BadRequest('Invalid webhook signature');
      }
      const out = applyCheckoutEvent(ctx.state, { provider: provider.name, eventId: event.id, type: event.type, checkoutId: event.checkout_id });
      req.log.info({ event: event.id, checkout: event.checkout_id, outcome: out.outcome }, 'webhook processed');
      return { received: true, event_id: event.id, outcome: out.outcome };
    },
  },
];
