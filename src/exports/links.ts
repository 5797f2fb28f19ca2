import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * pmlake's own download links for exports in the local store:
 *   GET /v1/exports/{job_id}/file?expires=<unix seconds>&signature=<hex HMAC-SHA256>
 * The HMAC covers the job id, its owner, the object key (one per attempt) and the expiry, so a link cannot be
 * extended (rewriting `expires` breaks the signature), moved to another job or user, or reused for a re-run.
 * Like an S3 presigned GET it needs no API key and may be fetched any number of times until it expires.
 */
export type LinkFields = { jobId: string; userId: string; objectKey: string; expires: number };

const SECRET_FILE = 'export-link-secret';

/**
 * The signing secret: PMLAKE_LINK_SECRET, or a random one generated once and kept in the state directory
 * (mode 0600) so links survive restarts. 'wx' makes two processes starting at once agree on one file.
 */
export function loadLinkSecret(configured: string | undefined, stateDir: string): Buffer {
  if (configured) return Buffer.from(configured, 'utf8');
  const file = path.join(stateDir, SECRET_FILE);
  try {
    fs.writeFileSync(file, crypto.randomBytes(32).toString('hex'), { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const hex = fs.readFileSync(file, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`${file} is not a 32-byte hex secret; remove it to generate a new one`);
  return Buffer.from(hex, 'hex');
}

function mac(secret: Buffer, f: LinkFields): Buffer {
  // NUL-separated: no field can contain NUL, so no two field lists give the same message.
  return crypto
    .createHmac('sha256', secret)
    .update(['pmlake-export-link-v1', f.jobId, f.userId, f.objectKey, String(f.expires)].join('\0'))
    .digest();
}

export function signLink(secret: Buffer, f: LinkFields): string {
  return mac(secret, f).toString('hex');
}

export type LinkCheck = 'ok' | 'invalid' | 'expired';

/**
 * Checks a link's query against the job it names. The signature is compared first, in constant time: only a
 * genuine link is ever told that it expired.
 */
export function checkLink(secret: Buffer, job: Omit<LinkFields, 'expires'>, expires: unknown, signature: unknown, nowMs = Date.now()): LinkCheck {
  if (typeof expires !== 'string' || !/^\d{1,12}$/.test(expires)) return 'invalid';
  if (typeof signature !== 'string' || !/^[0-9a-fA-F]{64}$/.test(signature)) return 'invalid';
  const want = mac(secret, { ...job, expires: Number(expires) });
  if (!crypto.timingSafeEqual(want, Buffer.from(signature, 'hex'))) return 'invalid';
  return Number(expires) * 1000 > nowMs ? 'ok' : 'expired';
}
