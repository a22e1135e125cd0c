/**
 * A test file's temporary folder for its stores and checkpoint directories: made before its
 * tests, removed after them (node:test hooks registered by the call, at the file's top level).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';

/** @returns `fresh(what)`: a new path `<folder>/<what>-<n>` (not created) in the folder `prefix` names */
export function freshPaths(prefix: string): (what: string) => string {
  let work: string | undefined;
  let n = 0;
  before(async () => {
    work = await mkdtemp(path.join(tmpdir(), prefix));
  });
  after(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });
  return (what) => path.join(work!, `${what}-${n++}`);
}
