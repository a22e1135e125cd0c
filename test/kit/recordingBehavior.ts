import type { Behavior } from '../../src/runtime/actor/index.js';

/** Messages understood by {@link recordingBehavior}. */
export type Recording =
  /** Recorded as `<name>:got <id>`; replies with `<id>@<incarnation>`. */
  | { readonly op: 'work'; readonly id: string }
  /** `receive()` throws `error` synchronously. */
  | { readonly op: 'throw'; readonly error: unknown }
  /** `receive()` returns a promise rejected with `error`. */
  | { readonly op: 'reject'; readonly error: unknown };

/**
 * A behaviour that writes its life into `journal`: `<name>:start#<n>` (n = incarnation, from 1),
 * `<name>:got <id>#<n>`, `<name>:stop#<n>`. `failStart(n)` may return an error to make the n-th
 * `start()` throw it.
 */
export function recordingBehavior(
  name: string,
  journal: string[],
  options: { readonly kind?: string; readonly failStart?: (incarnation: number) => unknown } = {},
): Behavior<Recording, number, string> {
  let incarnations = 0;
  return {
    kind: options.kind ?? 'recorder',
    start: () => {
      const n = ++incarnations;
      const error = options.failStart?.(n);
      if (error !== undefined) {
        journal.push(`${name}:start-failed#${n}`);
        throw error;
      }
      journal.push(`${name}:start#${n}`);
      return n;
    },
    receive: (n, message) => {
      switch (message.op) {
        case 'work':
          journal.push(`${name}:got ${message.id}#${n}`);
          return `${message.id}@${n}`;
        case 'throw':
          throw message.error;
        case 'reject':
          return Promise.reject(message.error);
      }
    },
    stop: (n) => {
      journal.push(`${name}:stop#${n}`);
    },
  };
}
