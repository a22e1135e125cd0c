/**
 * `shardflow/testing`: what tests of a topology, an actor or a broker need (Pekko's
 * TestKit, xstate's SimulatedClock): a clock that moves only when told, a probe actor that
 * records what it receives, and the broker conformance suite that every `Broker`
 * implementation must pass (it registers `node:test` suites).
 *
 * @module shardflow/testing
 */
export { ManualClock } from './manualClock.js';
export { createProbe } from './probe.js';
export type { Probe } from './probe.js';
export { brokerConformance, eventually, pull, pullAck } from './brokerConformance.js';
export type { BrokerFactory, ForeignEntry } from './brokerConformance.js';
export type { RawFields } from '../runtime/brokers/internal/malformed.js';
