/** Typed arrays the metric keeps per slot or target id. */
type Growable = Int32Array<ArrayBuffer> | Float64Array<ArrayBuffer> | Uint8Array<ArrayBuffer>;

/**
 * A copy of `a` at least `n` long (size doubled from `a.length`, at least 1), zero-filled
 * past the old end; `a` itself when already long enough.
 */
export function grown<A extends Growable>(a: A, n: number): A {
  if (a.length >= n) return a;
  let size = Math.max(1, a.length);
  while (size < n) size *= 2;
  const out = new (a.constructor as new (size: number) => A)(size);
  out.set(a);
  return out;
}
