import { InvalidArgumentError } from '../errors.js';
import type { BrokerIdentity } from '../runtime/brokers/identity.js';
import { CLUSTER_NAME } from './keys.js';

/**
 * The broker scope every process of cluster `clusterName` shares, so that the workers and
 * their clients (producers, `clusterStatus`) meet on the same topics:
 *
 * ```
 * memory                   { kind: 'memory' }   (one process only: nothing crosses processes)
 * redis://host:port[/db]   { kind: 'redis',  url, scope: 'sf:cluster:<name>:' }      keys sf:cluster:<name>:<namespace>/<partition>, ...
 * pulsar://host:port       { kind: 'pulsar', url, scope: 'shardflow-cluster-<name>' } tenant of every topic
 * ```
 * Unlike a run's fresh scope (`freshBrokerIdentity`: 8 hex digits), it is derived from the
 * cluster name, so it is the same in every worker and survives their restarts;
 * `deleteBrokerScope(identity)` removes it when the cluster is retired.
 * @param spec `memory`, `redis://host:port[/db]` or `pulsar://host:port` (Pulsar's HTTP port)
 * @throws InvalidArgumentError for another broker form or a bad cluster name
 */
export function clusterBrokerIdentity(spec: string, clusterName: string): BrokerIdentity {
  if (!CLUSTER_NAME.test(clusterName)) throw new InvalidArgumentError(`cluster name ${JSON.stringify(clusterName)} must be 1 to 64 letters, digits, '.', '_' or '-'`);
  if (spec === 'memory') return { kind: 'memory' };
  if (spec.startsWith('redis://')) return { kind: 'redis', url: spec, scope: `sf:cluster:${clusterName}:` };
  if (spec.startsWith('pulsar://')) return { kind: 'pulsar', url: spec, scope: `shardflow-cluster-${clusterName}` };
  throw new InvalidArgumentError(`unsupported broker ${JSON.stringify(spec)}: use memory, redis://host:port or pulsar://host:port`);
}
