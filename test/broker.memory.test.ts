import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { brokerConformance } from './kit/brokers.js';

brokerConformance({
  name: 'memory',
  unavailable: async () => undefined,
  // One process-wide broker: "another client" must see the same topics.
  create: (() => {
    const shared = new MemoryBroker();
    const clients = new Set<MemoryBroker>();
    return async () => {
      clients.add(shared);
      return {
        kind: shared.kind,
        producer: (t, o) => shared.producer(t, o),
        subscribe: (t, o) => shared.subscribe(t, o),
        deadLetters: (t, s) => shared.deadLetters(t, s),
        close: async () => {},
      };
    };
  })(),
  quietMs: 300,
});
