import { planOf } from '../../accounts/plans.js';
import type { Principal } from '../../accounts/principal.js';

export function nowMicros(): bigint {
  return BigInt(Date.now()) * 1000n;
}

/** Free plans see top of book only with a delay (src/accounts/plans.ts): the latest instant they may see. */
export function delayCap(principal: Principal | undefined): bigint | null {
  const delay = principal ? planOf(principal.plan).top_of_book_delay_minutes : 0;
  return delay > 0 ? nowMicros() - BigInt(delay) * 60_000_000n : null;
}
