import crypto from 'node:crypto';

/**
 * Webhook signatures, Stripe-style: header `Pmlake-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` where
 * the MAC covers `<t>.<raw body>`. The timestamp inside the MAC bounds replays of a captured request to the
 * tolerance window; event ids make replays inside the window harmless.
 */
export const SIGNATURE_HEADER = 'pmlake-signature';
export const TOLERANCE_SECONDS = 300;

export function sign(secret: string, rawBody: string | Buffer, at: Date = new Date()): string {
  const t = Math.floor(at.getTime() / 1000);
  return `t=${t},v1=${mac(secret, t, rawBody)}`;
}

function mac(secret: string, t: number, rawBody: string | Buffer): string {
  return crypto.createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest('hex');
}

/** True when the header carries a valid MAC for this body, made within the tolerance of `at`. */
export function verify(secret: string, rawBody: Buffer, header: string | undefined, at: Date = new Date()): boolean {
  if (!header || header.length > 1000) return false;
  const parts = new Map<string, string[]>();
  for (const p of header.split(',')) {
    const i = p.indexOf('=');
    if (i <= 0) continue;
    const k = p.slice(0, i).trim();
    parts.set(k, [...(parts.get(k) ?? []), p.slice(i + 1).trim()]);
  }
  const tRaw = parts.get('t')?.[0];
  if (!tRaw || !/^\d{1,12}$/.test(tRaw)) return false;
  const t = Number(tRaw);
  if (Math.abs(at.getTime() / 1000 - t) > TOLERANCE_SECONDS) return false;
  const expected = Buffer.from(mac(secret, t, rawBody), 'hex');
  // Several v1 values are allowed (secret rotation); each is compared in constant time.
  return (parts.get('v1') ?? []).some((v) => {
    if (!/^[0-9a-f]{64}$/.test(v)) return false;
    return crypto.timingSafeEqual(Buffer.from(v, 'hex'), expected);
  });
}
