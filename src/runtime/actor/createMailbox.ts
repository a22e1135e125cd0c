import { InvalidArgumentError } from '../../errors.js';
import { Mailbox } from './mailbox.js';
import type { MailboxOptions } from './spawnOptions.js';

const POLICIES: ReadonlySet<string> = new Set(['backpressure', 'drop-newest', 'fail']);

/**
 * Builds a mailbox from spawn options (unbounded when `options` is undefined).
 * @throws `InvalidArgumentError` unless `capacity` is an integer >= 1 or `Infinity` and `overflow` a known policy.
 */
export function createMailbox<M, R>(options: MailboxOptions | undefined): Mailbox<M, R> {
  if (options === undefined) return new Mailbox(Infinity, 'backpressure');
  const { capacity, overflow = 'backpressure' } = options;
  if (capacity !== Infinity && (!Number.isInteger(capacity) || capacity < 1)) {
    throw new InvalidArgumentError(`mailbox capacity must be an integer >= 1 or Infinity, got ${capacity}`);
  }
  if (!POLICIES.has(overflow)) throw new InvalidArgumentError(`unknown mailbox overflow policy ${JSON.stringify(overflow)}`);
  return new Mailbox(capacity, overflow);
}
