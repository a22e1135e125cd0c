import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { PartitionCheckpointer } from '../src/index.js';
import { openCheckpointStore, Store } from '../src/storage/index.js';
import type { StageCheckpointing } from '../src/runtime/stream/stageCheckpoints.js';
import { memoryLogger, tempDir } from './kit/datasets.js';

/**
 * The idle checkpoint of a partition checkpointer (docs/checkpoints.md, "The web index"): a
 * held settle is released by a checkpoint 100 ms after the last hold, unless it was held with
 * `idle: false` (the metric actor's folds, released by the next push's checkpoint); then it
 * waits for a checkpoint asked for otherwise (here a reply, `afterCheckpoint`). Real RocksDB
 * store, real directory checkpoint store.
 */
test('a hold with idle: false waits for a checkpoint asked for otherwise; a default hold is released by the idle checkpoint', { timeout: 60_000 }, async () => {
  const dir = tempDir('sf-ckpt-idle-');
  const checkpoints = openCheckpointStore(pathToFileURL(join(dir.dir, 'checkpoints')).href);
  const store = await Store.open({ path: join(dir.dir, 'p0'), columnFamilies: { meta: {}, pages: {} } });
  const checkpointing: StageCheckpointing = { store: checkpoints, keyPrefix: 'idle-test', intervalMs: 60_000 };
  const checkpointer = new PartitionCheckpointer({
    checkpointing, stage: 'index', partition: 0, metaFamily: 'meta',
    acquire: async () => store, release: async () => {}, logger: memoryLogger().log,
  });
  try {
    checkpointer.start();
    const settled: string[] = [];
    await store.put('pages', Buffer.from('fold'), Buffer.from('committed'));
    checkpointer.hold({}, 3, async () => void settled.push('fold acks'), 256, { idle: false });
    await sleep(1000);
    assert.equal(settled.length, 0, 'no idle checkpoint released the idle: false hold');
    assert.equal(checkpointer.checkpoints, 0, 'and none was put');
    assert.equal(checkpointer.heldMessages, 3);
    await checkpointer.afterCheckpoint(); // a reply asks for one (a push's)
    assert.deepEqual(settled, ['fold acks'], 'the next checkpoint released it');
    assert.equal(checkpointer.checkpoints, 1);

    await store.put('pages', Buffer.from('index'), Buffer.from('committed'));
    checkpointer.hold({}, 1, async () => void settled.push('indexer ack'), 64);
    const deadline = Date.now() + 20_000;
    while (settled.length < 2 && Date.now() < deadline) await sleep(50);
    assert.deepEqual(settled, ['fold acks', 'indexer ack'], 'a default hold is released by the idle checkpoint, without a reply or the interval');
    assert.equal(checkpointer.checkpoints, 2);
    assert.ok(await checkpoints.latest(checkpointer.key));
  } finally {
    await checkpointer.close();
    await store.close();
    await checkpoints.close();
    dir.cleanup();
  }
});
