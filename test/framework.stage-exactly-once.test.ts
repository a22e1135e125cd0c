import { test } from 'node:test';
import { MemoryBroker, type Broker } from '../src/index.js';
import { stageExactlyOnceScenario } from './kit/stageScenario.js';

// The framework's exactly-once stage checks (test/kit/stageScenario.ts) over the memory
// broker; test/framework.stage-exactly-once-wire.test.ts runs them over Redis and Pulsar.
test('a stage under chaos over the memory broker: counts equal ground truth, a restarted producer is counted, bad input is dead-lettered', { timeout: 300_000 }, async () => {
  // The in-memory broker lives in the process: both "runs" share one, as two runs of a
  // process on one machine share a Redis server.
  const broker = new MemoryBroker();
  const shared: Broker = { ...broker, kind: broker.kind, producer: (t, o) => broker.producer(t, o), subscribe: (t, o) => broker.subscribe(t, o), deadLetters: (t, s) => broker.deadLetters(t, s), close: async () => {} };
  await stageExactlyOnceScenario(async () => shared, () => broker.close());
});
