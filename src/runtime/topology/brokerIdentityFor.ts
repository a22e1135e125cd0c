import { freshBrokerIdentity } from '../brokers/connect.js';
import type { BrokerIdentity } from '../brokers/identity.js';
import { readTopologyRecord } from './dataDirRecord.js';

/**
 * The broker identity for a run of a topology on `dataDir` over the broker `url` (`memory`,
 * `redis://host:port[/db]`, `pulsar://host:port`): the one the data dir's record names when it
 * is the same broker (same kind and address), so that a run killed with messages in flight
 * resumes from the scope (Redis key prefix, Pulsar tenant) that still holds them, and a quiet
 * data dir keeps one scope across runs; otherwise a fresh one (`freshBrokerIdentity`).
 * Connect with `connectBroker(identity)`; keep the scope as long as the data dir (remove both
 * together: `deleteBrokerScope(identity)`).
 * @example
 * const broker = await connectBroker(brokerIdentityFor(dataDir, 'redis://127.0.0.1:6379'));
 * const running = await topology.start({ broker, dataDir });
 * @throws InvalidArgumentError for an unsupported `url`; DataDirError for a damaged record
 */
export function brokerIdentityFor(dataDir: string, url: string): BrokerIdentity {
  const fresh = freshBrokerIdentity(url);
  const recorded = readTopologyRecord(dataDir)?.broker;
  if (!recorded || fresh.kind === 'memory') return fresh;
  return recorded.kind === fresh.kind && recorded.url === fresh.url && recorded.scope ? recorded : fresh;
}
