/**
 * A real checkpoint store with its `put` replaced (a slower upload, a lease lost during it):
 * every other member is the real store's, called on it, since its methods use private fields
 * that an `Object.create(real)` wrapper would not have.
 */
import type { CheckpointStore } from '../../src/storage/index.js';

/** `real`, whose `put` is `put` (which may call `real.put`). */
export function withPut(real: CheckpointStore, put: CheckpointStore['put']): CheckpointStore {
  return new Proxy(real, {
    get: (target, p) => {
      if (p === 'put') return put;
      const v: unknown = Reflect.get(target, p, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
