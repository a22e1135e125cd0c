import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DirectoryObjects } from '../src/checkpoint/directoryObjects.js';
import { IncrementalCheckpointStore } from '../src/checkpoint/incremental.js';
import type { CheckpointObjects } from '../src/checkpoint/objects.js';
import { S3Objects, s3ConnectionFromEnv } from '../src/checkpoint/s3Objects.js';
import { Store } from '../src/storage/index.js';
import { s3Env, S3_BUCKET, s3Unavailable } from './kit/s3.js';
import { expectedAfter, walColumnFamilies, walContents, writeWalBatch } from './kit/walCheckpoint.js';
import { freshPaths } from './kit/freshPaths.js';

/**
 * Issue 16, a cheaper round: a put with `fencedWriter` (the partitions' checkpointer, whose
 * lease fences every other writer of the key and is checked again after the put) trusts this
 * process's record of the key's latest checkpoint for a WAL tail put instead of listing the
 * key's manifests first (a LIST request per put to S3: about a third of a tail put's time there
 * during a cnr-2000 rank). On real RocksDB stores and the real checkpoint stores (a directory,
 * and the S3 server of scripts/s3/start.sh: skipped without it, failed instead under
 * SHARDFLOW_REQUIRE_BROKERS=1): which puts list, and what a writer fenced off meanwhile leaves
 * (a manifest below the next owner's, never restored as the latest).
 */

const fresh = freshPaths('shardflow-fenced-writer-');

/** Counts the listings of each folder kind (`manifests`, `files`) that `objects` answers. */
function countingLists(objects: CheckpointObjects): { objects: CheckpointObjects; lists: { manifests: number; files: number } } {
  const lists = { manifests: 0, files: 0 };
  const list = objects.list.bind(objects);
  objects.list = async (prefix) => {
    if (prefix.endsWith('/manifests/')) lists.manifests++;
    if (prefix.endsWith('/files/')) lists.files++;
    return list(prefix);
  };
  return { objects, lists };
}

const targets: Array<{ name: string; unavailable: () => Promise<string | undefined>; open: () => CheckpointObjects }> = [
  { name: 'directory', unavailable: async () => undefined, open: () => new DirectoryObjects(fresh('ckpt')) },
  { name: 's3 (the local S3 server)', unavailable: s3Unavailable, open: () => new S3Objects(S3_BUCKET, `test/fenced-writer-${process.pid}-${randomBytes(4).toString('hex')}`, s3ConnectionFromEnv(s3Env())) },
];

for (const target of targets) {
  const reason = await target.unavailable();
  describe(`a fenced writer's tail puts: ${target.name}`, { skip: reason ? `unavailable: ${reason}` : false }, () => {
    it('a tail put of a fenced writer lists no manifests; a put without the option, a whole put and a put after another writer list them', { timeout: 60_000 }, async () => {
      const { objects, lists } = countingLists(target.open());
      const checkpoints = new IncrementalCheckpointStore(objects);
      const store = await Store.open({ path: fresh('db'), columnFamilies: walColumnFamilies });
      try {
        for (let b = 0; b < 50; b++) await writeWalBatch(store, b);
        const whole = await checkpoints.put('k', store, 1, { fencedWriter: true });
        assert.equal(whole.walTail, false);
        assert.equal(lists.manifests, 1, 'a whole put lists the manifests');
        for (let b = 50; b < 80; b++) await writeWalBatch(store, b);
        const tail = await checkpoints.put('k', store, 2, { fencedWriter: true });
        assert.equal(tail.walTail, true);
        assert.equal(lists.manifests, 1, 'a fenced tail put lists nothing');
        for (let b = 80; b < 90; b++) await writeWalBatch(store, b);
        assert.equal((await checkpoints.put('k', store, 3)).walTail, true);
        assert.equal(lists.manifests, 2, 'without the option, a tail put lists the manifests');
        // The record is this process's: a put of another checkpoint store object (another
        // process) is not known to it, and a fenced tail put does not see it.
        const other = new IncrementalCheckpointStore(objects);
        const copy = await Store.open({ path: fresh('other-db'), columnFamilies: walColumnFamilies });
        try {
          for (let b = 0; b < 5; b++) await writeWalBatch(copy, b);
          await other.put('k', copy, 2 ** 32); // the next owner's first put (its epoch's sequences)
        } finally {
          await copy.close();
        }
        for (let b = 90; b < 100; b++) await writeWalBatch(store, b);
        const stale = await checkpoints.put('k', store, 4, { fencedWriter: true });
        assert.equal(stale.walTail, true, 'the fenced-off writer still puts its tail');
        const latest = await checkpoints.latest('k');
        assert.equal(latest?.sequence, 2 ** 32, "the next owner's checkpoint stays the latest: the stale one is below it");
        const dir = fresh('restored');
        const r = await checkpoints.restore('k', dir);
        assert.equal(r.manifest.sequence, 2 ** 32);
        const restored = await Store.open({ path: dir, columnFamilies: walColumnFamilies });
        try {
          assert.deepEqual(await walContents(restored), expectedAfter(5), "a restore holds the next owner's state");
        } finally {
          await restored.close();
        }
        // The stale manifest is still a whole checkpoint of the fenced writer's store.
        const staleDir = fresh('stale');
        await checkpoints.restore('k', staleDir, { sequence: 4 });
        const s = await Store.open({ path: staleDir, columnFamilies: walColumnFamilies });
        try {
          assert.deepEqual(await walContents(s), expectedAfter(100));
        } finally {
          await s.close();
        }
        // A collect of the next owner keeps its newest and removes the stale one below.
        const c = await other.collect('k', 1);
        assert.deepEqual(c.kept, [2 ** 32]);
        assert.ok(c.removed.includes(4));
      } finally {
        await store.close();
        await checkpoints.close();
      }
    });
  });
}
