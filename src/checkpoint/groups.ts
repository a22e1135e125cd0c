/**
 * Group manifests: the manifests of several keys' WAL tail puts stored as one object
 * (docs/checkpoints.md, "Group commits"). A worker's partitions end their metric pushes
 * within milliseconds of each other and each waits for its put; one object for all of them
 * instead of one per partition divides the requests (and their fixed costs: a PUT's
 * signing and round trip, the server's work per request) by the partitions a worker holds,
 * as a database's group commit writes the log records of concurrent transactions with one
 * write (Gray and Reuter, "Transaction Processing", 1992; RocksDB's write groups).
 *
 * Only keys of one parent share an object: `<parent>/_groups/<entries>`, where `<entries>` is
 * `<leaf>-<sequence>-<sequence - floor>` (both numbers in base 36) for each key
 * `<parent>/<leaf>` it holds,
 * joined by `!` (a key segment never begins with `_`, so no key's folder is `_groups`), so
 * that a listing of the parent's `_groups/` folder tells every key which of its checkpoints
 * are there, without a read. The floor is the lowest sequence of the key
 * that its collects still keep once that checkpoint is among its newest: every process's
 * collect removes a group object whose every entry is below its key's floor (the floor of
 * the key's newest entry), and a listing leaves such entries out. The object's bytes: a JSON
 * header line (`GROUP_FORMAT`, the
 * entries with each manifest's size), a newline, then each entry's manifest object exactly
 * as `encodeManifest` makes it (its JSON, and its packed chunks after a newline). A manifest
 * in a group is read as the same bytes its own object would hold, so its packed chunks'
 * `in` (a sequence of the same key) finds it wherever it is stored.
 *
 * Internal to src/checkpoint.
 */
import { CheckpointDamagedError } from '../errors.js';

/** The format of a group object's header line. */
export const GROUP_FORMAT = 'shardflow-checkpoint-group/1';

/** The folder of the group objects of the keys under `parent`. */
export const groupsPrefix = (parent: string): string => `${parent}/_groups/`;

/**
 * Bytes at most of a group object's last name segment: a file name in a directory store, and
 * in S3-compatible servers that keep objects as files (S3Proxy's and MinIO's filesystem
 * backends: 255 bytes on common filesystems), with room for a temporary suffix. About 12
 * entries of a leaf such as `p12` (`p12-1ekg2wm3r-4`: 16 bytes and a separator).
 */
export const GROUP_NAME_MAX = 230;

const ENTRY = /^([A-Za-z0-9][A-Za-z0-9._-]{0,127})-([0-9a-z]{1,11})-([0-9a-z]{1,11})$/;

/** One key's manifest in a group object. */
export interface GroupEntry {
  /** The key's last segment (the key is `<parent>/<leaf>`). */
  readonly leaf: string;
  /** The manifest's sequence. */
  readonly sequence: number;
  /**
   * The lowest sequence of the key that a collect keeping its newest checkpoints (as many as
   * the writer's `keep`) keeps or reads packed chunks from once this one is among them; 0
   * when the writer did not know them all.
   */
  readonly floor: number;
}

/** The parent and leaf of a key of 2 or more segments; undefined for a key of one segment (never grouped). */
export function splitKey(key: string): { readonly parent: string; readonly leaf: string } | undefined {
  const i = key.lastIndexOf('/');
  return i < 0 ? undefined : { parent: key.slice(0, i), leaf: key.slice(i + 1) };
}

/** An entry's part of a group object's name. */
export const groupEntryName = (e: GroupEntry): string => `${e.leaf}-${e.sequence.toString(36)}-${(e.sequence - e.floor).toString(36)}`;

/** The name of the group object holding `entries` (two or more) under `parent`. */
export const groupName = (parent: string, entries: readonly GroupEntry[]): string =>
  `${groupsPrefix(parent)}${entries.map(groupEntryName).join('!')}`;

/**
 * The entries a group object's name lists, or undefined when `name` is not a group object of
 * `parent` (another object, or a name this format does not make).
 */
export function entriesOfGroup(parent: string, name: string): GroupEntry[] | undefined {
  const prefix = groupsPrefix(parent);
  if (!name.startsWith(prefix)) return undefined;
  const out: GroupEntry[] = [];
  for (const part of name.slice(prefix.length).split('!')) {
    const m = ENTRY.exec(part);
    if (!m) return undefined;
    const sequence = parseInt(m[2]!, 36);
    const below = parseInt(m[3]!, 36);
    if (!Number.isSafeInteger(sequence) || !Number.isSafeInteger(below) || below > sequence) return undefined;
    out.push({ leaf: m[1]!, sequence, floor: sequence - below });
  }
  return out.length >= 2 ? out : undefined;
}

/** The bytes of a group object holding `manifests` (each as `encodeManifest` made it), in the order of `entries`. */
export function encodeGroup(entries: readonly GroupEntry[], manifests: readonly Uint8Array[]): Buffer {
  const header = Buffer.from(JSON.stringify({
    format: GROUP_FORMAT,
    entries: entries.map((e, i) => ({ leaf: e.leaf, sequence: e.sequence, bytes: manifests[i]!.length })),
  }));
  return Buffer.concat([header, Buffer.from([0x0a]), ...manifests]);
}

/** Where an entry's manifest lies in its group object: `leaf-sequence` to byte offset and size. */
export type GroupHeader = ReadonlyMap<string, readonly [offset: number, bytes: number]>;

/** The key of an entry in a `GroupHeader`. */
export const headerKey = (leaf: string, sequence: number): string => `${leaf}-${sequence}`;

/**
 * The header of group object `name` from its first bytes (`head`, at least the header line).
 * @returns the header, or undefined when `head` ends before the header line does (read more)
 * @throws Error saying why when the header does not parse or is not this format's
 */
export function decodeGroupHeader(head: Buffer): GroupHeader | undefined {
  const end = head.indexOf(0x0a);
  if (end < 0) return undefined;
  const header = JSON.parse(head.subarray(0, end).toString('utf8')) as { format?: unknown; entries?: unknown };
  if (header.format !== GROUP_FORMAT) throw new Error(`its format is ${JSON.stringify(header.format)}, not ${GROUP_FORMAT}`);
  if (!Array.isArray(header.entries)) throw new Error('its header lists no entries');
  const out = new Map<string, readonly [number, number]>();
  let at = end + 1;
  for (const e of header.entries as Array<{ leaf?: unknown; sequence?: unknown; bytes?: unknown }>) {
    if (typeof e?.leaf !== 'string' || typeof e.sequence !== 'number' || typeof e.bytes !== 'number' || !Number.isSafeInteger(e.bytes) || e.bytes < 0) {
      throw new Error(`an entry of its header is not a leaf, a sequence and a size: ${JSON.stringify(e)}`);
    }
    out.set(headerKey(e.leaf, e.sequence), [at, e.bytes]);
    at += e.bytes;
  }
  return out;
}

/** Wraps why a group object is damaged into the error of the checkpoint read from it. */
export function groupDamaged(name: string, key: string, sequence: number, why: string): CheckpointDamagedError {
  return new CheckpointDamagedError(`checkpoint ${key}@${sequence} is in group object ${name}, which is damaged: ${why}`, key, sequence);
}
