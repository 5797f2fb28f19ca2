/** Money is integer cents inside (the ledger, sessions, orders) and USD outside (bodies and answers). */
export const usd = (cents: number) => Math.round(cents) / 100;
export const cents = (amount: number) => Math.round(amount * 100);
