import type { TestContext } from 'node:test';
import { pulsarUnavailable } from '../../src/testing/brokerConformance.js';
/** The broker conformance suite and its helpers moved to `shardflow/testing` (src/testing/brokerConformance.ts). */
export { brokerConformance, pulsarUnavailable, text, str, pull, pullAck, eventually } from '../../src/testing/brokerConformance.js';
export type { BrokerFactory, ForeignEntry } from '../../src/testing/brokerConformance.js';

/** The web (admin REST and WebSocket) URL of the Pulsar the tests use. */
export const PULSAR_WEB_URL = process.env.SHARDFLOW_PULSAR_URL ?? 'http://127.0.0.1:8080';

/**
 * Skips the test when Pulsar is not reachable at {@link PULSAR_WEB_URL}, or fails it with
 * SHARDFLOW_REQUIRE_BROKERS=1 (as CI runs).
 * @returns the `pulsar://` broker spec of that Pulsar, or undefined when skipped
 * @throws Error with the reason when SHARDFLOW_REQUIRE_BROKERS=1 and Pulsar is unreachable
 */
export async function skipWithoutPulsar(t: TestContext): Promise<string | undefined> {
  const reason = await pulsarUnavailable(PULSAR_WEB_URL);
  if (!reason) return PULSAR_WEB_URL.replace(/^http:/, 'pulsar:');
  if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw new Error(`pulsar is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${reason}`);
  t.skip(`pulsar unavailable: ${reason}`);
  return undefined;
}
