/**
 * Key of a `gcLog` record: the removal time as 8-byte big-endian ms (so records sort by
 * time), then the URL. @param removedAt ms since the epoch
 */
export function gcLogKey(removedAt: number, url: string): Buffer {
  const u = Buffer.from(url, 'utf8');
  const key = Buffer.allocUnsafe(8 + u.length);
  key.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(removedAt))), 0);
  u.copy(key, 8);
  return key;
}

/** Inverse of `gcLogKey`. */
export function parseGcLogKey(key: Uint8Array): { removedAt: number; url: string } {
  const b = Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  return { removedAt: Number(b.readBigUInt64BE(0)), url: b.toString('utf8', 8) };
}
