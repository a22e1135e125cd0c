// A lease lost while a partition's checkpoint is being put (issue 16; the stall of the cnr-2000
// checkpoint bench). The next owner acquires the partition once the lease ran out and restores
// the latest checkpoint *then*: when the old owner's put finishes after that, its checkpoint is
// not what the next owner runs from. Before the fix the old owner still acked the input
// messages its cut held (and answered the replies waiting on it): those messages were gone from
// the broker while the next owner's state did not hold them, so their effects were lost for good
// and the job's quiet detection waited forever (receivers' marks below what the senders'
// outboxes had sent). Now the fence is checked again once the manifest is durable, and nothing
// the checkpoint covers is released when it fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FencedError, FlowCounters, MemoryBroker, PartitionCheckpointer, type PartitionFence } from '../src/index.js';
import { openCheckpointStore, Store, type CheckpointStore } from '../src/storage/index.js';
import { stageColumnFamilies } from '../src/runtime/stream/reserved.js';
import { StreamOutbox } from '../src/runtime/stream/outbox.js';
import { producerId } from '../src/runtime/ids.js';
import { StageCheckpointer, type StageCheckpointing } from '../src/runtime/stream/stageCheckpoints.js';
import { memoryLogger, tempDir } from './kit/datasets.js';
import { withPut } from './kit/checkpointStoreWrap.js';

/** A lease that the checkpoint store below loses while a put is under way. */
class PutFence implements PartitionFence {
  lost = false;
  constructor(readonly epoch: number) {}
  check(): void {
    if (this.lost) throw new FencedError(`lease of epoch ${this.epoch} ran out during the checkpoint's put`, this.epoch);
  }
}

/** The real directory store, whose puts end after `fence` is lost (as an upload longer than the lease does). */
function losingLeaseDuringPut(real: CheckpointStore, fence: PutFence): CheckpointStore {
  return withPut(real, async (...args) => {
    const report = await real.put(...args);
    fence.lost = true;
    return report;
  });
}

test('a partition checkpointer whose lease runs out during the put releases nothing the checkpoint covers: no ack, no reply', { timeout: 60_000 }, async () => {
  const dir = tempDir('sf-ckpt-lease-');
  const real = openCheckpointStore(pathToFileURL(join(dir.dir, 'checkpoints')).href);
  const store = await Store.open({ path: join(dir.dir, 'p0'), columnFamilies: { meta: {}, pages: {} } });
  const fence = new PutFence(3);
  const checkpointing: StageCheckpointing = { store: losingLeaseDuringPut(real, fence), keyPrefix: 'lease-test', intervalMs: 60_000 };
  const checkpointer = new PartitionCheckpointer({
    checkpointing, stage: 'index', partition: 0, metaFamily: 'meta', fence,
    acquire: async () => store, release: async () => {}, logger: memoryLogger().log,
  });
  try {
    await store.put('pages', Buffer.from('a'), Buffer.from('applied'));
    const settled: string[] = [];
    const consumer = {};
    checkpointer.hold(consumer, 1, async () => void settled.push('ack'), 64);
    const reply = checkpointer.afterCheckpoint();
    await assert.rejects(reply, (err: unknown) => err instanceof FencedError, 'the reply waiting for the checkpoint gets the FencedError, not an answer');
    assert.equal(settled.length, 0, 'the held ack was not sent: the next owner may run from an older checkpoint, and the broker redelivers to it');
    assert.equal(checkpointer.checkpoints, 0, 'a put whose lease ran out is not counted as this owner\'s checkpoint');
    const manifest = await real.latest(checkpointer.key);
    assert.ok(manifest, 'the manifest itself was stored (a later owner\'s sequences rank above it)');
    // Fenced for good: what is held later is never settled, and a new reply is refused at once.
    checkpointer.hold(consumer, 1, async () => void settled.push('late ack'), 64);
    await assert.rejects(checkpointer.afterCheckpoint(), (err: unknown) => err instanceof FencedError);
    assert.equal(settled.length, 0, `nothing settled after the fence: ${settled.join(', ')}`);
  } finally {
    await checkpointer.close();
    await store.close();
    await real.close();
    dir.cleanup();
  }
});

test('a stage checkpointer whose lease runs out during the put settles nothing it held', { timeout: 60_000 }, async () => {
  const dir = tempDir('sf-ckpt-lease-stage-');
  const real = openCheckpointStore(pathToFileURL(join(dir.dir, 'checkpoints')).href);
  const store = await Store.open({ path: join(dir.dir, 'p0'), columnFamilies: stageColumnFamilies({ counts: {} }) });
  const fence = new PutFence(5);
  const checkpointing: StageCheckpointing = { store: losingLeaseDuringPut(real, fence), keyPrefix: 'lease-test', intervalMs: 60_000 };
  const checkpointer = new StageCheckpointer(checkpointing, 'count', 0, store, fence, undefined);
  try {
    await store.put('counts', Buffer.from('k'), Buffer.from('1'));
    const settled: number[] = [];
    checkpointer.hold({ messages: 2, settle: async () => void settled.push(2) }, true);
    const outbox = await StreamOutbox.open({ store, broker: new MemoryBroker(), counters: new FlowCounters(), owner: 'count', producer: producerId('count@0'), fence });
    await assert.rejects(checkpointer.checkpoint(outbox, memoryLogger().log), (err: unknown) => err instanceof FencedError);
    assert.deepEqual(settled, [], 'no ack after a put whose lease ran out');
    assert.equal(checkpointer.heldMessages, 2, 'the held batch is left to the broker\'s redelivery (the partition stops)');
    assert.ok(await real.latest(checkpointer.key), 'the manifest was stored');
  } finally {
    await store.close();
    await real.close();
    dir.cleanup();
  }
});
