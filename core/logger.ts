import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/** Structured JSON logs (pino): fast, and the de-facto standard for Node services. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}
