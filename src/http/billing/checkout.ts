import type { Request } from 'express';
import { z } from 'zod';
import { configuredProvider } from '../../payments/configured.js';
import { type CheckoutIntent, ProviderError } from '../../payments/provider.js';
import { createCheckout, type CheckoutRow } from '../../state/billing.js';
import { newId } from '../../state/store.js';
import type { AppContext } from '../context.js';
import { Unavailable, UpstreamFailed } from '../../errors.js';
import { publicBase } from '../public-url.js';

/** Where the provider returns the customer (success_url, cancel_url): an http(s) URL. */
export const ReturnUrl = z
  .string()
  .max(2000)
  .url()
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http(s) URL');

/**
 * Opening a checkout, shared by the credit and subscription checkouts. No provider configured: 503 and
 * nothing stored (the local provider, which confirms without payment, exists only when an operator turns it
 * on). The provider's side is opened first and the session stored after, with the provider's id for it, so a
 * provider that refuses or cannot be reached leaves nothing behind.
 */
export const NO_PROVIDER_DETAIL = 'Checkout is not available: this server has no payment provider configured';

export async function openCheckout(
  req: Request,
  ctx: AppContext,
  fields: Omit<CheckoutIntent, 'id' | 'user_id' | 'created_at'>,
): Promise<{ session: CheckoutRow; url: string }> {
  const provider = configuredProvider(ctx.config);
  if (!provider) throw new Unavailable(NO_PROVIDER_DETAIL);
  const intent: CheckoutIntent = { ...fields, id: newId('chk'), user_id: req.principal!.userId, created_at: new Date().toISOString() };
  let opened;
  try {
    opened = await provider.open(intent, publicBase(ctx.config, req));
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    // The reason (and the provider's address) goes to the log; the caller learns what failed, not where.
    req.log.error({ err: err.message, status: err.status, provider: provider.name, checkout: intent.id }, 'payment provider refused the checkout');
    throw new UpstreamFailed('The payment provider could not start the checkout; nothing was charged. Try again later.');
  }
  const session = await createCheckout(ctx.state, { ...intent, provider: provider.name, provider_ref: opened.providerRef, status: 'open', completed_at: null });
  req.log.info({ checkout: session.id, provider: provider.name, provider_ref: opened.providerRef, kind: session.kind }, 'checkout opened');
  return { session, url: opened.url };
}
