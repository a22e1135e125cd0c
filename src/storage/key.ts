/** Keys are bytes; strings are UTF-8. */
export type Key = Uint8Array | string;

/** The bytes of a key (a string is UTF-8 encoded; a Uint8Array is returned as is). */
export function keyBytes(key: Key): Uint8Array {
  return typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
}
