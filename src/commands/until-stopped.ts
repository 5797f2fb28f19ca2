/**
 * A long-running role's end: on SIGINT or SIGTERM, `close` (stop taking work, let running work go back or
 * finish, close the databases), then exit 0. Never resolves otherwise.
 */
export async function runUntilStopped(close: () => Promise<void>): Promise<never> {
  const stop = (): void => {
    void close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return new Promise<never>(() => {});
}
