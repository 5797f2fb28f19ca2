/** 2^256 − 1, the largest outcome token id (an ERC-1155 id), in decimal. */
const MAX_UINT256 = '115792089237316195423570985008687907853269984665640564039457584007913129639935';

/**
 * An outcome token id as the venue and the chain spell it: a uint256 in decimal, 1 to 78 digits. The same rule
 * as the ingest's (sql/ingest/identifiers.sql pm_bad_token), for what is taken before any ingest: the
 * recorder's subscriptions.
 */
export function isTokenId(s: string): boolean {
  if (!/^[0-9]{1,78}$/.test(s)) return false;
  return s.length < 78 || s <= MAX_UINT256;
}
