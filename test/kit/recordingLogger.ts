import type { Logger } from '../../src/runtime/actor/index.js';

/** One call to a {@link recordingLogger}. */
export interface LogEntry {
  readonly level: 'debug' | 'warn' | 'error';
  readonly fields: object;
  readonly message: string | undefined;
}

/** A logger that keeps entries in `entries` instead of printing (tests stay quiet and can assert on logs). */
export function recordingLogger(): Logger & { readonly entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  return {
    entries,
    debug: (fields, message) => void entries.push({ level: 'debug', fields, message }),
    warn: (fields, message) => void entries.push({ level: 'warn', fields, message }),
    error: (fields, message) => void entries.push({ level: 'error', fields, message }),
  };
}
