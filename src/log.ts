import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * The one logger. Structured JSON lines on stderr so stdout stays clean for CLI output (keys, tables).
 * Asynchronous writes: a synchronous write(2) per request line showed up in the hot path's profile.
 * `dest`: another stream for the lines (the ingest's terminal progress display writes them through process.stderr).
 */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', dest?: DestinationStream): Logger {
  return pino({ level, base: { svc: 'pmlake' } }, dest ?? pino.destination({ dest: 2, sync: false }));
}

export type { Logger };
