import crypto from 'node:crypto';

/**
 * Paddle Billing's webhook signature: header `Paddle-Signature: ts=<unix seconds>;h1=<hex HMAC-SHA256>`, the
 * MAC keyed with the notification destination's secret over `<ts>:<raw body>`. During a secret rotation the
 * header carries one h1 per secret: any match is accepted. The timestamp must be within the tolerance of now
 * (Paddle's SDKs allow 5 s), which bounds replays of a captured request; event ids make replays inside the
 * window harmless (src/state/billing.ts).
 */
export const PADDLE_SIGNATURE_HEADER = 'paddle-signature';

export function verifyPaddleSignature(secret: string, rawBody: Buffer, header: string | undefined, opts: { toleranceSeconds: number; now?: Date }): boolean {
  if (!header || header.length > 2000) return false;
  let ts: string | undefined;
  const h1: string[] = [];
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i <= 0) continue;
    const key = part.slice(0, i).trim();
    const value = part.slice(i + 1).trim();
    if (key === 'ts') ts ??= value;
    else if (key === 'h1') h1.push(value);
  }
  if (!ts || !/^\d{1,12}$/.test(ts) || h1.length === 0) return false;
  const nowSeconds = (opts.now ?? new Date()).getTime() / 1000;
  if (Math.abs(nowSeconds - Number(ts)) > opts.toleranceSeconds) return false;
  // The MAC covers the timestamp exactly as sent, then the body's bytes as received (never re-serialised).
  const expected = crypto.createHmac('sha256', secret).update(`${ts}:`).update(rawBody).digest();
  let ok = false;
  for (const v of h1) {
    // Every candidate is compared, each in constant time, so timing says nothing about which one matched.
    if (/^[0-9a-f]{64}$/i.test(v) && crypto.timingSafeEqual(Buffer.from(v, 'hex'), expected)) ok = true;
  }
  return ok;
}
