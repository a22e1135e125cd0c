import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { partitionId, producerId } from '../src/runtime/ids.js';
import { topic } from '../src/runtime/topics.js';
import { brokerConformance, eventually, pull, str, text } from './kit/brokers.js';

/** What the conformance suite's brokers are configured with. */
const maxPayloadBytes = 64 * 1024;
// One process-wide broker: "another client" must see the same topics.
const shared = new MemoryBroker({ maxPayloadBytes });

brokerConformance({
  name: 'memory',
  unavailable: async () => undefined,
  create: async () => ({
    kind: shared.kind,
    producer: (t, o) => shared.producer(t, o),
    subscribe: (t, o) => shared.subscribe(t, o),
    deadLetters: (t, s) => shared.deadLetters(t, s),
    close: async () => {},
  }),
  injectForeign: async (t, entry) => shared.appendRaw(t, entry),
  maxPayloadBytes,
  quietMs: 300,
});

test('memory: a subscription keeps at most maxDeadLetters dead letters, the newest', async () => {
  const b = new MemoryBroker({ maxDeadLetters: 3 });
  try {
    const t = topic('links', partitionId(1));
    const c = await b.subscribe(t, { subscription: 's', type: 'exclusive' });
    const p = await b.producer(t, { producer: producerId('p') });
    for (let i = 0; i < 5; i++) await p.send(text('d', i));
    const got = await pull(c, 5, 5000);
    assert.equal(got.length, 5);
    for (const m of got) await c.deadLetter(m, `reason ${str(m)}`);
    const dead = await eventually(() => b.deadLetters(t, 's'), (d) => d.length === 3, 5000, 'dead letters');
    assert.deepEqual(dead.map((d) => d.reason), ['reason d:2', 'reason d:3', 'reason d:4']);
  } finally {
    await b.close();
  }
});
