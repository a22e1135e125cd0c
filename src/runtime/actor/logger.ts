/**
 * The logging surface the actor runtime needs: a subset of pino's API (`logger.warn(fields, msg)`),
 * so a pino logger can be passed as is.
 */
export interface Logger {
  /** Diagnostic detail: dropped messages, stale failure reports. */
  debug(fields: object, message?: string): void;
  /** Something was handled but deserves attention, e.g. a `stop()` hook that threw. */
  warn(fields: object, message?: string): void;
  /** A failure that the runtime could not hand to a supervisor. */
  error(fields: object, message?: string): void;
}

/** Default logger: `warn`/`error` to `console.error` as one line each, `debug` dropped. */
export const consoleLogger: Logger = Object.freeze({
  debug(): void {},
  warn(fields: object, message?: string): void {
    console.error(`[shardflow] warn: ${message ?? ''}`, fields);
  },
  error(fields: object, message?: string): void {
    console.error(`[shardflow] error: ${message ?? ''}`, fields);
  },
});
