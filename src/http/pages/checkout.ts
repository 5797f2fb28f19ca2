import type { CheckoutRow } from '../../state/billing.js';

/**
 * The local payment provider's hosted checkout page (src/http/billing/local-checkout.ts serves it): pure
 * functions from a session to HTML and to the page's Content-Security-Policy. Every value is escaped.
 */
type Session = Pick<CheckoutRow, 'id' | 'status' | 'kind' | 'amount_cents' | 'tier' | 'billing_period'>;

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function html(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font-size:1rem;padding:.5rem 1.25rem;margin-right:.5rem}.muted{color:#666}</style>
</head><body>${body}</body></html>`;
}

/**
 * The page posts only to itself and loads nothing: locked down. form-action also governs the redirect after a
 * form post, so it allows the session's own return origins (none on pages without a form).
 */
export function checkoutPageCsp(returnUrls: string[] = []): string {
  const origins = returnUrls.map((u) => new URL(u).origin).join(' ');
  return `default-src 'none'; style-src 'unsafe-inline'; form-action 'self' ${origins}; base-uri 'none'; frame-ancestors 'none'`;
}

function what(co: Session): string {
  const amount = `${(co.amount_cents / 100).toFixed(2)} USD`;
  return co.kind === 'credits' ? `Buy ${amount} of credits` : `${co.tier} subscription (${co.billing_period}): ${amount}`;
}

/** An open session: what is bought, and the Pay and Cancel buttons. */
export function openCheckoutPage(co: Session): string {
  return html(
    'pmlake checkout',
    `<h1>pmlake checkout</h1><p id="summary">${esc(what(co))}</p>
<p class="muted">Local test provider: no card is charged. Paying sends a signed webhook to pmlake.</p>
<form method="post" action="/v1/billing/checkout/local/${esc(co.id)}/confirm" style="display:inline"><button id="pay" type="submit">Pay ${esc((co.amount_cents / 100).toFixed(2))} USD</button></form>
<form method="post" action="/v1/billing/checkout/local/${esc(co.id)}/cancel" style="display:inline"><button id="cancel" type="submit">Cancel</button></form>`,
  );
}

/** A session already completed or canceled: no button. */
export function closedCheckoutPage(co: Session): string {
  return html('Checkout closed', `<h1>Checkout ${esc(co.status)}</h1><p class="muted">${esc(what(co))}</p>`);
}

/** The provider side could not deliver its webhook (`status` 0: not reached at all). */
export function notConfirmedPage(status: number): string {
  return html(
    'Payment not confirmed',
    `<h1>Payment not confirmed</h1><p>The payment provider could not notify pmlake (status ${status}). Nothing was charged; try again.</p>`,
  );
}
