/** The broker conformance suite and its helpers moved to `shardflow/testing` (src/testing/brokerConformance.ts). */
export { brokerConformance, pulsarUnavailable, text, str, pull, pullAck, eventually } from '../../src/testing/brokerConformance.js';
export type { BrokerFactory, ForeignEntry } from '../../src/testing/brokerConformance.js';
