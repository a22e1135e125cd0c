import { StoreClosedError } from '../errors.js';
import type { NativeSnapshot } from './native.js';

/**
 * A point-in-time view of one store, shared by reads on all its column families: pass it
 * as `{ snapshot }` to get, multiGet, iterate and chunks to read a consistent state
 * across column families while writes go on.
 *
 * Holding a snapshot keeps old versions from being compacted away: release it when done.
 * `release()` is idempotent; reads already started with it finish normally, later ones
 * reject with StoreClosedError. Closing the store releases it too.
 */
export class Snapshot {
  #native: NativeSnapshot | undefined;

  /** @internal Made by Store.snapshot(). */
  constructor(native: NativeSnapshot) {
    this.#native = native;
  }

  /** @internal The native handle, or undefined once released. */
  get native(): NativeSnapshot | undefined {
    return this.#native;
  }

  get released(): boolean {
    return this.#native === undefined;
  }

  release(): void {
    this.#native?.release();
    this.#native = undefined;
  }
}

/**
 * @internal The native snapshot of a read's `{ snapshot }` option, or undefined without one.
 * @throws StoreClosedError for a released snapshot
 */
export function nativeSnapshotOf(opts: { snapshot?: Snapshot } | undefined): NativeSnapshot | undefined {
  const snap = opts?.snapshot;
  if (snap === undefined) return undefined;
  const native = snap.native;
  if (native === undefined) throw new StoreClosedError('snapshot is released');
  return native;
}
