/**
 * Compaction filters, declared by kind: the code runs in C++ (native/src/filters/) on
 * RocksDB's compaction threads. A filter sees full values only (never merge operands),
 * keeps any value it cannot parse,
 * and counts what it examined and dropped (`store.stats().columnFamilies[cf]`). "Now" is
 * the wall clock at compaction time, in ms.
 *
 * Snapshots do not protect filtered values: RocksDB ignores snapshots for compaction
 * filters, so a snapshot read can miss a value that a compaction dropped after the
 * snapshot was taken.
 */
import type { Key } from '../storage/key.js';

export type CompactionFilterSpec =
  | { readonly kind: 'ttl'; readonly field: string; readonly ttlMs: number }
  | { readonly kind: 'tombstones'; readonly graceMs: number }
  | { readonly kind: 'drop_prefixes'; readonly prefixes: readonly Key[] };

/**
 * Drops msgpack records (maps) whose `field` — ms since the epoch as a number, or a
 * msgpack timestamp (a Date written by msgpackr) — is older than now - ttlMs.
 */
export const ttl = (options: { field: string; ttlMs: number }): CompactionFilterSpec =>
  ({ kind: 'ttl', field: options.field, ttlMs: options.ttlMs }) as const;

/**
 * Drops tombstones older than now - graceMs: values in last-write-wins layout (8-byte LE
 * int64 timestamp in ms, then payload) whose payload is empty.
 */
export const tombstones = (options: { graceMs: number }): CompactionFilterSpec =>
  ({ kind: 'tombstones', graceMs: options.graceMs }) as const;

/** Drops every value whose key starts with one of `prefixes` (e.g. a host that was removed). */
export const dropPrefixes = (prefixes: readonly Key[]): CompactionFilterSpec =>
  ({ kind: 'drop_prefixes', prefixes: [...prefixes] }) as const;
