import { StoredSpecError } from '../downloads/spec.js';
import { ServiceError } from '../errors.js';
import { s3ErrorOf } from './store.js';

/**
 * What a failed export tells its owner. The job's `error` says what failed, never where: a raw storage error
 * names the store's host and port ("connect ECONNREFUSED …") and a DuckDB one can name lake paths. The
 * whole error goes to the log (the job id is on the line); the user gets one of the sentences below.
 */

/** The object store failed during the upload (unreachable, refused a part, disk full, …). */
export class StorageError extends Error {
  constructor(cause: unknown) {
    super('object storage failed', { cause });
    this.name = 'StorageError';
  }
}

/** The job's owner was deleted while the job waited. */
export class AccountGone extends Error {
  constructor() {
    super('the account no longer exists');
    this.name = 'AccountGone';
  }
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED']);

function storageReason(cause: unknown): string {
  const code = (cause as { code?: string } | null)?.code;
  if (code === 'ENOSPC' || code === 'EDQUOT') return 'object storage is full';
  const { status } = s3ErrorOf(cause);
  // An HTTP answer means the store was there and said no; anything else (no socket, reset, timeout) is down.
  if (status !== undefined && !UNREACHABLE.has(code ?? '')) return status >= 500 ? 'object storage failed' : 'object storage refused the upload';
  return 'object storage unavailable';
}

/** The sentence after "export failed: " — our own messages pass through, anything from below is named only by what failed. */
export function failureReason(err: unknown, shuttingDown: boolean): string {
  if (shuttingDown) return 'the service shut down during the build';
  if (err instanceof StorageError) return storageReason(err.cause);
  if (err instanceof AccountGone) return err.message;
  // Names the field that does not parse and why, never the stored text itself.
  if (err instanceof StoredSpecError) return err.message;
  // Refusals raised by planning (unknown market, plan coverage, …) are written for the caller already.
  if (err instanceof ServiceError) return typeof err.detail === 'string' ? err.detail : JSON.stringify(err.detail);
  return 'the export could not be built';
}

export function failureMessage(err: unknown, shuttingDown: boolean): string {
  return `export failed: ${failureReason(err, shuttingDown)}; nothing was charged`;
}
