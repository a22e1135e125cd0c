import { InvalidArgumentError } from '../../errors.js';

/**
 * Validates an actor name: a non-empty string of at most 200 characters without `/` (the path
 * separator) or whitespace.
 * @throws `InvalidArgumentError` otherwise.
 */
export function checkActorName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 200 || /[\s/]/.test(name)) {
    throw new InvalidArgumentError(`actor name must be 1-200 characters without '/' or whitespace, got ${JSON.stringify(name)}`);
  }
}
