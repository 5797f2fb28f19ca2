import { pino, type Logger } from 'pino';

/** The one logger. Structured JSON lines on stderr so stdout stays clean for CLI output (keys, tables). */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ level, base: { svc: 'pmlake' } }, pino.destination(2));
}

export const log: Logger = createLogger();
export type { Logger };
