import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { StreamMarks, epochSequence, producerId, type Sequence } from '../src/index.js';
import { Store } from '../src/storage/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * A producer handed back twice between two checkpoints of its receiver runs three epochs, and
 * after the receiver restarts the broker delivers the older epochs' messages again, after the
 * newest epoch's were applied. Those copies are redeliveries (`applied`), not a fenced-off
 * incarnation (`conflict`, dead-lettered): the marks keep the last applied sequence of each
 * earlier epoch. A message an older epoch sent after the next took over is still a conflict.
 */
const families = { meta: {} };
const P = producerId('sessions@5');

async function applyAll(marks: StreamMarks, store: Store, seqs: Sequence[], path: 'record' | 'advance'): Promise<void> {
  const batch = store.batch();
  for (const seq of seqs) {
    assert.equal((await marks.classify(P, seq)).kind, 'new', `sequence ${seq} is new`);
    if (path === 'advance') marks.advance(P, seq);
    else marks.record(batch, P, seq);
  }
  if (path === 'advance') marks.record(batch, P, seqs.at(-1)!);
  await store.write(batch);
}

for (const path of ['record', 'advance'] as const) {
  test(`applied marks keep the last applied sequence of earlier epochs (${path} per message)`, async () => {
    const { dir, cleanup } = tempDir();
    const storePath = join(dir, 'store');
    let store = await Store.open({ path: storePath, columnFamilies: families });
    try {
      let marks = new StreamMarks(store, 'pages', { meta: 'meta' });
      const s = epochSequence;
      await applyAll(marks, store, [s(1, 0), s(1, 1), s(1, 2), s(1, 3)], path);
      await applyAll(marks, store, [s(2, 0), s(2, 1)], path); // handed back after two messages
      await applyAll(marks, store, [s(3, 0), s(3, 1), s(3, 2)], path);
      const verdicts = async () => ({
        oldCopy: (await marks.classify(P, s(1, 2))).kind,
        oldLast: (await marks.classify(P, s(1, 3))).kind,
        midCopy: (await marks.classify(P, s(2, 1))).kind,
        current: (await marks.classify(P, s(3, 2))).kind,
        next: (await marks.classify(P, s(3, 3))).kind,
        oldAfter: await marks.classify(P, s(1, 4)),
        midAfter: await marks.classify(P, s(2, 2)),
      });
      for (const when of ['in this incarnation', 'after a reopen']) {
        const v = await verdicts();
        assert.equal(v.oldCopy, 'applied', `${when}: a copy of an epoch-1 message is a redelivery`);
        assert.equal(v.oldLast, 'applied', `${when}: so is epoch 1's last`);
        assert.equal(v.midCopy, 'applied', `${when}: and epoch 2's`);
        assert.equal(v.current, 'applied', `${when}: the current epoch's as before`);
        assert.equal(v.next, 'new');
        assert.equal(v.oldAfter.kind, 'conflict', `${when}: epoch 1 sending after epoch 2 took over is fenced off`);
        assert.equal(v.midAfter.kind, 'conflict', `${when}: epoch 2 sending after epoch 3 took over too`);
        assert.match(v.midAfter.kind === 'conflict' ? v.midAfter.reason : '', /epoch 2 \(sequence 2\) is older than its epoch 3 already applied by pages, and was sent after the last message of epoch 2 applied before it \(sequence 1\)/);
        await store.close();
        store = await Store.open({ path: storePath, columnFamilies: families });
        marks = new StreamMarks(store, 'pages', { meta: 'meta' });
      }
      assert.deepEqual(await marks.previousEpochs(P), [s(2, 1), s(1, 3)], 'the newest first');
    } finally {
      await store.close();
      cleanup();
    }
  });
}

test('applied marks keep at most PREVIOUS_EPOCHS_KEPT earlier epochs; an epoch no longer kept is a conflict', async () => {
  const { dir, cleanup } = tempDir();
  const store = await Store.open({ path: join(dir, 'store'), columnFamilies: families });
  try {
    const marks = new StreamMarks(store, 'pages', { meta: 'meta' });
    for (let epoch = 1; epoch <= 12; epoch++) await applyAll(marks, store, [epochSequence(epoch, 0)], 'record');
    const kept = await marks.previousEpochs(P);
    assert.deepEqual(kept, [11, 10, 9, 8, 7, 6, 5, 4].map((e) => epochSequence(e, 0)));
    assert.equal((await marks.classify(P, epochSequence(4, 0))).kind, 'applied');
    assert.equal((await marks.classify(P, epochSequence(3, 0))).kind, 'conflict');
  } finally {
    await store.close();
    cleanup();
  }
});

test('an external producer (no @ in its name) is never given the redelivery verdict for an older epoch: its epoch file may have been lost, so it is dead-lettered, not dropped', async () => {
  // Found by a new user: a client whose producer epoch file was lost started again at epoch 1,
  // and its 300 sentences were taken for redelivered copies and dropped in silence.
  const { dir, cleanup } = tempDir();
  const store = await Store.open({ path: join(dir, 'store'), columnFamilies: families });
  try {
    const marks = new StreamMarks(store, 'split', { meta: 'meta' });
    const ext = producerId('sentence-src');
    const s = epochSequence;
    for (const seqs of [[s(1, 0), s(1, 1), s(1, 2)], [s(2, 0)]]) {
      const batch = store.batch();
      for (const seq of seqs) {
        assert.equal((await marks.classify(ext, seq)).kind, 'new');
        marks.record(batch, ext, seq);
      }
      await store.write(batch);
    }
    const again = await marks.classify(ext, s(1, 0)); // epoch 1 again: a lost epoch file, or a copy
    assert.equal(again.kind, 'conflict');
    assert.match(again.kind === 'conflict' ? again.reason : '', /producer sentence-src epoch 1 \(sequence 0\) is older than its epoch 2 already applied by split, .*epoch file lost or copied \(<dataDir>\/producers\/sentence-src\.epoch/);
    assert.equal((await marks.classify(ext, s(2, 0))).kind, 'applied', 'a copy of the current epoch is a redelivery as before');
  } finally {
    await store.close();
    cleanup();
  }
});

test('a source-offsets producer (name#offsets) takes any sequence at or below its mark as applied, across 2^32 ranges; an epoch producer of the same name is apart', async () => {
  const { dir, cleanup } = tempDir();
  const store = await Store.open({ path: join(dir, 'store'), columnFamilies: families });
  try {
    const marks = new StreamMarks(store, 'clicks', { meta: 'meta' });
    const O = producerId('ingest#offsets');
    const E = producerId('ingest');
    const batch = store.batch();
    for (const seq of [7, 2 ** 32 + 3, 3 * 2 ** 32 + 9] as Sequence[]) {
      assert.equal((await marks.classify(O, seq)).kind, 'new');
      marks.record(batch, O, seq);
    }
    marks.record(batch, E, epochSequence(5, 1));
    await store.write(batch);
    // The input sent again from its start: every offset at or below the mark, in any range.
    for (const seq of [0, 7, 2 ** 32, 2 ** 32 + 3, 2 * 2 ** 32 + 100, 3 * 2 ** 32 + 9] as Sequence[]) {
      assert.equal((await marks.classify(O, seq)).kind, 'applied', `offset ${seq} is at or below the mark`);
    }
    assert.equal((await marks.classify(O, (3 * 2 ** 32 + 10) as Sequence)).kind, 'new');
    // The epoch producer's older epoch is still a conflict: the rule is the offsets producer's alone.
    assert.equal((await marks.classify(E, epochSequence(2, 0))).kind, 'conflict');
  } finally {
    await store.close();
    cleanup();
  }
});
