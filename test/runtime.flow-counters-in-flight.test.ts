import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { seededRandom } from '../src/runtime/supervision/seededRandom.js';
import { FlowCounters } from '../src/runtime/stream/flowCounters.js';
import { InFlightSequences } from '../src/runtime/stream/inFlightSequences.js';
import { topic } from '../src/runtime/topics.js';
import { partitionId } from '../src/runtime/ids.js';

// FlowCounters keeps each (producer, topic)'s in-flight sequences in an InFlightSequences: a
// bitmap window with a Set beside it. Whatever the order of sends and settles, it must
// answer as a Set does.
describe('InFlightSequences', () => {
  it('answers as a Set over sends in order, settles out of order, replays, epochs and far jumps', () => {
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const rnd = seededRandom(seed);
      const seqs = new InFlightSequences();
      const model = new Set<number>();
      const epochBase = seed % 2 === 0 ? 3 * 2 ** 32 : 0;
      let next = 0;
      for (let step = 0; step < 20_000; step++) {
        const r = rnd();
        let seq: number;
        if (r < 0.45) seq = epochBase + next++; // the usual: the next sequence
        else if (r < 0.8 && model.size > 0) {
          // settle one in flight, most often the oldest
          const held = [...model];
          seq = rnd() < 0.7 ? Math.min(...held) : held[Math.floor(rnd() * held.length)]!;
        } else if (r < 0.9) seq = epochBase + Math.floor(rnd() * (next + 10)); // a replay, or a copy
        else if (r < 0.95) seq = (epochBase + 2 ** 32) + Math.floor(rnd() * 50); // the next epoch
        else if (r < 0.97) seq = epochBase + next + 2 ** 25; // beyond the window's cap
        else seq = epochBase + next + Math.floor(rnd() * 5000); // ahead of the window
        if (rnd() < 0.5) assert.equal(seqs.add(seq), !model.has(seq) && (model.add(seq), true), `seed ${seed} step ${step}: add ${seq}`);
        else assert.equal(seqs.delete(seq), model.delete(seq), `seed ${seed} step ${step}: delete ${seq}`);
        assert.equal(seqs.size, model.size, `seed ${seed} step ${step}: size`);
      }
      for (const seq of model) assert.equal(seqs.has(seq), true, `seed ${seed}: holds ${seq}`);
      for (const seq of [...model]) assert.equal(seqs.delete(seq), model.delete(seq));
      assert.equal(seqs.size, 0);
    }
  });

  it('takes a bursty producer: 200,000 sent before any settles, then settled in order', () => {
    const seqs = new InFlightSequences();
    const base = 7 * 2 ** 32;
    for (let n = 0; n < 200_000; n++) assert.equal(seqs.add(base + n), true);
    assert.equal(seqs.add(base + 123), false, 'already in flight');
    assert.equal(seqs.size, 200_000);
    for (let n = 0; n < 200_000; n++) assert.equal(seqs.delete(base + n), true);
    assert.equal(seqs.size, 0);
    assert.equal(seqs.delete(base), false, 'settled already');
    // After it emptied, the window is placed anew where the next sequences are.
    assert.equal(seqs.add(5), true);
    assert.equal(seqs.has(5), true);
    assert.equal(seqs.has(base + 5), false);
  });

  it('keeps sequences that are not safe integers in its Set', () => {
    const seqs = new InFlightSequences();
    for (const seq of [-1, 0.5, 2 ** 53 + 2]) {
      assert.equal(seqs.add(seq), true);
      assert.equal(seqs.has(seq), true);
    }
    assert.equal(seqs.size, 3);
    assert.equal(seqs.delete(0.5), true);
    assert.equal(seqs.size, 2);
  });
});

describe('FlowCounters.onSettledMessages', () => {
  it('settles a batch as onSettled would each message: in flight once, by producer and topic', () => {
    const c = new FlowCounters();
    const t0 = topic('clicks', partitionId(0));
    const t1 = topic('clicks', partitionId(1));
    for (let n = 0; n < 4; n++) c.onSent('clicks', { producer: 'a', topic: 'clicks/0', sequence: n });
    c.onSent('clicks', { producer: 'b', topic: 'clicks/0', sequence: 0 });
    c.onSent('clicks', { producer: 'a', topic: 'clicks/1', sequence: 0 });
    const epoch = c.epoch();
    const settled = c.onSettledMessages('clicks', [
      { producer: 'a', topic: t0, sequence: 0 },
      { producer: 'a', topic: t0, sequence: 1 },
      { producer: 'b', topic: t0, sequence: 0 },
      { producer: 'a', topic: t0, sequence: 1 }, // a copy in the same batch: settles nothing
      { producer: 'c', topic: t0, sequence: 0 }, // sent by another process
      { producer: 'a', topic: t1, sequence: 0 },
    ]);
    assert.equal(settled, 4);
    assert.equal(c.settled.get('clicks'), 4);
    assert.ok(c.epoch() > epoch);
    assert.equal(c.balanced(), false, 'a@clicks/0 2 and 3 are in flight');
    assert.equal(c.onSettledMessages('clicks', [{ producer: 'a', topic: t0, sequence: 2 }, { producer: 'a', topic: t0, sequence: 3 }]), 2);
    assert.equal(c.balanced(), true);
    assert.equal(c.onSettledMessages('clicks', [{ producer: 'a', topic: t0, sequence: 3 }]), 0, 'settled already');
    assert.equal(c.settled.get('clicks'), 6);
    // A producer whose messages all settled is sent to again as new.
    assert.equal(c.onSent('clicks', { producer: 'a', topic: 'clicks/0', sequence: 3 }), true);
  });
});
