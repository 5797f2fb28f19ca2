import type { CheckoutRow } from '../state/billing.js';

/**
 * A payment provider: where a checkout session sends the customer. Each provider verifies its own webhooks on
 * its own route (src/http/billing/webhooks.ts): the local one (src/payments/local.ts) and Paddle Billing
 * (src/payments/paddle.ts). Which one takes payments is the operator's choice (PMLAKE_PAYMENT_PROVIDER);
 * with none configured there is no checkout at all.
 */
export type ProviderName = 'local' | 'paddle';

/** What a provider needs to open its side of a checkout: the session pmlake is about to store. */
export type CheckoutIntent = Omit<CheckoutRow, 'provider' | 'provider_ref' | 'status' | 'completed_at'>;

export type OpenedCheckout = {
  /** Where the customer pays. */
  url: string;
  /** The provider's id for this payment (null when pmlake itself is the provider). */
  providerRef: string | null;
};

export interface PaymentProvider {
  readonly name: ProviderName;
  /**
   * Opens the provider's side of a checkout. `baseUrl` is pmlake's own public base (src/http/public-url.ts),
   * for providers whose page pmlake serves. Throws when the provider refuses or cannot be reached.
   */
  open(intent: CheckoutIntent, baseUrl: string): Promise<OpenedCheckout>;
}

/** Raised when a hosted provider could not open a checkout; the message is for logs, not for callers. */
export class ProviderError extends Error {
  constructor(
    message: string,
    readonly status: number | null = null,
  ) {
    super(message);
  }
}
