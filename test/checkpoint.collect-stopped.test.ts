import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FencedError, PartitionCheckpointer } from '../src/index.js';
import { openCheckpointStore, Store, type CheckpointStore } from '../src/storage/index.js';
import { DirectoryObjects } from '../src/checkpoint/directoryObjects.js';
import { IncrementalCheckpointStore } from '../src/checkpoint/incremental.js';
import type { StageCheckpointing } from '../src/runtime/stream/stageCheckpoints.js';
import { memoryLogger, tempDir } from './kit/datasets.js';
import { until } from './kit/clusterRun.js';

/**
 * A collect of old checkpoints stops between its steps when its signal aborts (docs/checkpoints.md,
 * "Collect"), and a partition's checkpointer stops its collect when a checkpoint is asked for, so
 * that a push's put does not wait behind it (a collect against S3 took 127 ms, median, and 648 ms
 * p90, on cnr-2000). Real RocksDB stores, a real directory checkpoint store.
 */

const families = { meta: {}, pages: {} };

async function writePages(store: Store, from: number, count: number, tag: string): Promise<void> {
  const batch = store.batch();
  for (let i = from; i < from + count; i++) batch.put('pages', Buffer.from(`page-${String(i).padStart(6, '0')}`), Buffer.from(`${tag}:${'x'.repeat(200)}`));
  await store.write(batch);
  await store.flush();
}

test('a collect stopped by its signal after removing the old manifests leaves the newest checkpoints whole; the next put restores exactly and the next collect removes the rest', { timeout: 60_000 }, async () => {
  const dir = tempDir('sf-collect-stop-');
  let deletes = 0;
  const stop = new AbortController();
  const objects = new DirectoryObjects(join(dir.dir, 'checkpoints'));
  // The first delete (the old manifests, one slice) goes through, then the signal aborts.
  const deleteThenStop = objects.delete.bind(objects);
  objects.delete = async (names) => {
    await deleteThenStop(names);
    if (++deletes === 1) stop.abort(new Error('a checkpoint was asked for'));
  };
  const checkpoints = new IncrementalCheckpointStore(objects);
  const store = await Store.open({ path: join(dir.dir, 'p0'), columnFamilies: families });
  const key = 'stop-test/p0';
  const filesOf = () => readdirSync(join(dir.dir, 'checkpoints', key, 'files')).length;
  try {
    for (let s = 1; s <= 4; s++) {
      await writePages(store, s * 100, 100, `v${s}`);
      await checkpoints.put(key, store, s, { walTailBytes: 0 }); // whole puts: one SST more each
    }
    await store.compactRange('pages'); // the old SSTs are now of checkpoints 1 to 3 only
    await checkpoints.put(key, store, 5, { walTailBytes: 0 });
    const before = filesOf();

    await assert.rejects(checkpoints.collect(key, 1, { signal: AbortSignal.abort(new Error('at once')) }), /at once/);
    assert.deepEqual(await checkpoints.list(key), [1, 2, 3, 4, 5], 'an aborted signal removes nothing');
    // A fenced writer's lease check before each delete (found by a new user: an owner paused
    // past its lease woke in a collect and removed an SST of the next owner's checkpoint).
    let checks = 0;
    const leaseGone = () => {
      checks++;
      throw new FencedError('the lease ran out on the local clock');
    };
    await assert.rejects(checkpoints.collect(key, 1, { fence: leaseGone }), FencedError);
    assert.equal(checks, 1);
    assert.equal(deletes, 0, 'a fence that throws: no delete is sent');
    assert.deepEqual(await checkpoints.list(key), [1, 2, 3, 4, 5]);

    await assert.rejects(checkpoints.collect(key, 1, { signal: stop.signal }), /a checkpoint was asked for/);
    assert.equal(deletes, 1, 'stopped before the files');
    assert.deepEqual(await checkpoints.list(key), [5], 'the old manifests went, oldest first');
    assert.equal(filesOf(), before, 'no file was removed yet');

    await writePages(store, 900, 100, 'v6');
    const put = await checkpoints.put(key, store, 6, { walTailBytes: 0 });
    assert.ok(put.uploadedFiles < put.files, 'the put after the stopped collect still reuses the stored files');
    const restored = join(dir.dir, 'restored');
    await checkpoints.restore(key, restored);
    const copy = await Store.open({ path: restored, columnFamilies: families });
    try {
      for (const [i, tag] of [[100, 'v1'], [499, 'v4'], [950, 'v6']] as const) {
        assert.equal((await copy.get('pages', `page-${String(i).padStart(6, '0')}`))?.toString().split(':')[0], tag);
      }
    } finally {
      await copy.close();
    }
    const report = await checkpoints.collect(key, 1);
    assert.deepEqual(report.removed, [5]);
    assert.ok(report.removedFiles >= 3, `the files only the old checkpoints used are removed now (${report.removedFiles})`);
    assert.equal(filesOf(), put.files, 'what is left is the latest checkpoint\'s files');
  } finally {
    await store.close();
    await checkpoints.close();
    dir.cleanup();
  }
});

test('a partition checkpointer stops its collect when a checkpoint is asked for: the reply waits for the put only, and a later collect runs', { timeout: 60_000 }, async () => {
  const dir = tempDir('sf-collect-ask-');
  const real = openCheckpointStore(pathToFileURL(join(dir.dir, 'checkpoints')).href);
  const collects: string[] = [];
  // A collect that would take 30 s unless stopped: the first one; later ones are the store's.
  // (Delegated method by method: the store keeps private fields, which a prototype chain does not reach.)
  const slow: CheckpointStore = {
    url: real.url,
    put: (...a) => real.put(...a),
    latest: (...a) => real.latest(...a),
    list: (...a) => real.list(...a),
    restore: (...a) => real.restore(...a),
    warm: (...a) => real.warm(...a),
    remove: (...a) => real.remove(...a),
    close: () => real.close(),
    collect: (key: string, keep: number, options?: { signal?: AbortSignal }) => {
      if (collects.length > 0) {
        collects.push('ran');
        return real.collect(key, keep, options);
      }
      collects.push('held');
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => resolve(real.collect(key, keep)), 30_000);
        options?.signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          collects.push('stopped');
          reject(options.signal!.reason);
        });
      });
    },
  };
  const store = await Store.open({ path: join(dir.dir, 'p0'), columnFamilies: families });
  const checkpointing: StageCheckpointing = { store: slow, keyPrefix: 'ask-test', intervalMs: 60_000 };
  const checkpointer = new PartitionCheckpointer({
    checkpointing, stage: 'index', partition: 0, metaFamily: 'meta',
    acquire: async () => store, release: async () => {}, logger: memoryLogger().log,
  });
  try {
    checkpointer.start();
    // Every 4th checkpoint is followed by a collect.
    for (let i = 0; i < 4; i++) {
      await store.put('pages', Buffer.from(`k${i}`), Buffer.from('v'));
      await checkpointer.afterCheckpoint();
    }
    await until('the collect after the 4th checkpoint', async () => collects.length > 0, 10_000);
    assert.deepEqual(collects, ['held'], 'the 4th checkpoint began a collect');
    await store.put('pages', Buffer.from('k4'), Buffer.from('v'));
    const t0 = Date.now();
    await checkpointer.afterCheckpoint();
    assert.ok(Date.now() - t0 < 20_000, 'the reply did not wait for the held collect');
    assert.deepEqual(collects.slice(0, 2), ['held', 'stopped']);
    assert.equal(checkpointer.collectsStopped, 1);
    assert.equal(checkpointer.checkpoints, 5);
    // The stopped collect is still due: it runs after the next checkpoint nobody else asks for.
    await store.put('pages', Buffer.from('k5'), Buffer.from('v'));
    await checkpointer.afterCheckpoint();
    await until('the collect that was due', async () => collects.includes('ran'), 10_000);
    assert.deepEqual(collects, ['held', 'stopped', 'ran']);
    assert.deepEqual(await real.list(checkpointer.key).then((l) => l.length), 2, 'the collect kept the 2 newest');
  } finally {
    await checkpointer.close();
    await store.close();
    await real.close();
    dir.cleanup();
  }
});
