import { createHash } from 'node:crypto';
import os from 'node:os';
import type pg from 'pg';
import { connectPg, pgFailure } from '../state/pg.js';
import { Unavailable } from '../errors.js';

/**
 * PostgreSQL session-level advisory locks: a lock that holds across machines, for as long as one connection
 * lives. The server releases it when the session ends, however it ends (release, process exit, kill -9: the
 * socket closes), so no stale lock outlives its holder. Each lock is a connection of its own, kept idle.
 */
export type AdvisoryLock = {
  /** Unlocks and closes the session; idempotent. */
  release(): Promise<void>;
  /** True once the session was lost while held (server restart, network): from then on the lock is not held. */
  readonly lost: boolean;
};

/** The holder of a lock someone else has: its application name (role, host, pid), or undefined if not visible. */
export type Refusal = { holder: string | undefined };

/** A 64-bit key from a name: the first 8 bytes of its SHA-256, as PostgreSQL's signed bigint. */
export function advisoryKey(name: string): bigint {
  return createHash('sha256').update(name).digest().readBigInt64BE(0);
}

/**
 * Takes the lock named by `name()` without waiting (pg_try_advisory_lock), or answers who holds it. A server
 * that cannot be reached throws the core's Unavailable, whose detail names neither host nor password. `name` is
 * asked only once connected, so a caller whose name costs a side effect (a lake's first id) makes none when the
 * server is away.
 */
export async function tryAdvisoryLock(url: string, name: () => string, role: string): Promise<AdvisoryLock | Refusal> {
  let lost = false;
  const client = await connectPg(url, { applicationName: `pmlake ${role} pid ${process.pid} on ${os.hostname()}` }, () => (lost = true));
  let key: string;
  try {
    key = advisoryKey(name()).toString();
  } catch (err) {
    await client.end().catch(() => {});
    throw err;
  }
  try {
    const got = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS ok', [key]);
    if (!got.rows[0]?.ok) {
      const holder = await holderOf(client, key);
      await client.end();
      return { holder };
    }
  } catch (err) {
    await client.end().catch(() => {});
    throw new Unavailable(`PostgreSQL (PMLAKE_DATABASE_URL) failed while locking: ${pgFailure(err)}`);
  }
  let released = false;
  return {
    get lost() {
      return lost;
    },
    async release() {
      if (released) return;
      released = true;
      // Ending the session releases the lock even if the unlock itself fails.
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [key]).catch(() => {});
      await client.end().catch(() => {});
    },
  };
}

/**
 * Who holds a bigint advisory lock: PostgreSQL stores its high and low 32 bits in classid and objid (objsubid 1).
 * Best effort: a vanished holder or a failed lookup is simply unknown.
 */
async function holderOf(client: pg.Client, key: string): Promise<string | undefined> {
  try {
    const r = await client.query<{ application_name: string }>(
      `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
          AND l.classid::bigint = ($1::bigint >> 32) & 4294967295 AND l.objid::bigint = $1::bigint & 4294967295
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [key],
    );
    return r.rows[0]?.application_name || undefined;
  } catch {
    return undefined;
  }
}

export function isHeld(r: AdvisoryLock | Refusal): r is AdvisoryLock {
  return 'release' in r;
}
