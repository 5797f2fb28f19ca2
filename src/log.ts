import { pino, type Logger } from 'pino';

/**
 * The one logger. Structured JSON lines on stderr so stdout stays clean for CLI output (keys, tables).
 * Asynchronous writes: a synchronous write(2) per request line showed up in the hot path's profile.
 */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ level, base: { svc: 'pmlake' } }, pino.destination({ dest: 2, sync: false }));
}

export type { Logger };
