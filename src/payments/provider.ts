import type { CheckoutRow } from '../state/billing.js';

/**
 * A payment provider: where a checkout session sends the customer, and how its webhooks are verified. pmlake
 * ships the local provider (src/payments/local.ts); a hosted one (Paddle, Stripe) implements the same two
 * calls and gets its own webhook route.
 */
export type ProviderEvent = {
  id: string;
  type: 'checkout.completed' | 'checkout.canceled';
  checkout_id: string;
  created_at: string;
};

export interface PaymentProvider {
  readonly name: string;
  /** The hosted page for a stored, open checkout session. */
  checkoutUrl(session: CheckoutRow, baseUrl: string): string;
  /** The event in a webhook request, or null when its signature or shape is not valid. */
  verifyWebhook(rawBody: Buffer, signatureHeader: string | undefined, at?: Date): ProviderEvent | null;
}
