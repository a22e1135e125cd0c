import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FlowCounters } from '../src/runtime/stream/flowCounters.js';

// The quiescence check ends a job when every namespace settled what it sent; these are
// the broker's ways of breaking a naive count (Mattern's counters count messages, and a
// broker may deliver one message twice).
const ns = 'links';
const key = (sequence: number, producer = 'indexer@1') => ({ producer, topic: 'links/p-0001', sequence });

describe('FlowCounters', () => {
  it('balances when every message sent is settled, once each', () => {
    const c = new FlowCounters();
    assert.equal(c.balanced(), true);
    c.onSent(ns, key(0));
    c.onSent(ns, key(1));
    assert.equal(c.balanced(), false);
    assert.equal(c.onSettled(ns, key(1)), true);
    assert.equal(c.onSettled(ns, key(0)), true);
    assert.equal(c.balanced(), true);
  });

  it('a copy delivered again after its ack was lost, or a message of another process, settles nothing', () => {
    const c = new FlowCounters();
    c.onSent(ns, key(0));
    c.onSent(ns, key(1));
    c.onSettled(ns, key(0));
    assert.equal(c.onSettled(ns, key(0)), false, 'redelivered copy');
    assert.equal(c.onSettled(ns, key(7, 'crawler/old-process')), false, 'not sent here');
    assert.equal(c.balanced(), false, 'message 1 is still in flight');
    c.onSettled(ns, key(1));
    assert.equal(c.balanced(), true);
    assert.equal(c.settled.get(ns), 2);
  });

  it('a failed send is taken back; a replayed outbox row is in flight again until settled', () => {
    const c = new FlowCounters();
    c.onSent(ns, key(0));
    c.onSendFailed(ns, key(0));
    assert.equal(c.balanced(), true);
    assert.equal(c.sent.get(ns), 0);
    // Published and settled, then published again by an outbox replayed after a crash.
    c.onSent(ns, key(1));
    c.onSettled(ns, key(1));
    c.onSent(ns, key(1));
    assert.equal(c.balanced(), false);
    assert.equal(c.onSent(ns, key(1)), false, 'already in flight');
    c.onSettled(ns, key(1));
    assert.equal(c.balanced(), true);
  });

  it('local work in progress keeps it unbalanced; the epoch moves with every change', () => {
    const c = new FlowCounters();
    const e0 = c.epoch();
    c.begin();
    assert.equal(c.balanced(), false);
    c.done();
    assert.equal(c.balanced(), true);
    assert.ok(c.epoch() > e0);
  });
});
