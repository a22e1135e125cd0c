import { randomUUID } from 'node:crypto';
import { InvalidArgumentError } from '../../errors.js';
import type { Broker } from './broker.js';
import { SCOPE_FAMILY, type BrokerIdentity } from './identity.js';
import { MemoryBroker } from './memory.js';
import { PulsarBroker } from './pulsar/broker.js';
import { RedisStreamsBroker } from './redis-streams.js';
import { pulsarWebUrl } from './scope.js';

/**
 * The identity of a new run on the broker named by `url`: `memory`; `redis://host:port[/db]`
 * with a fresh key prefix `sf:<run>:`; `pulsar://host:port` (Pulsar's HTTP port) with a fresh
 * tenant `shardflow-<run>` (`<run>`: 8 random hex digits). Remove the scope after the run with
 * `deleteBrokerScope(identity)`.
 * @throws InvalidArgumentError for any other form
 */
export function freshBrokerIdentity(url: string): BrokerIdentity {
  if (url === 'memory') return { kind: 'memory' };
  const run = randomUUID().slice(0, 8);
  if (url.startsWith('redis://')) return { kind: 'redis', url, scope: `${SCOPE_FAMILY.redis}${run}:` };
  if (url.startsWith('pulsar://')) return { kind: 'pulsar', url, scope: `${SCOPE_FAMILY.pulsar}${run}` };
  throw new InvalidArgumentError(`unsupported broker ${JSON.stringify(url)}: use memory, redis://host:port or pulsar://host:port`);
}

/**
 * Connects to the broker of `identity` (see `freshBrokerIdentity`): the in-memory broker, Redis
 * Streams under the identity's key prefix, or Pulsar under its tenant.
 * @throws InvalidArgumentError for an unknown kind or a missing scope; the broker's
 *   connection errors (BrokerDisconnectedError) when it does not answer
 */
export async function connectBroker(identity: BrokerIdentity): Promise<Broker> {
  if (identity.kind === 'memory') return new MemoryBroker();
  if (!identity.url || !identity.scope) throw new InvalidArgumentError(`a ${identity.kind} broker identity needs a url and a scope`);
  if (identity.kind === 'redis') return RedisStreamsBroker.connect({ url: identity.url, prefix: identity.scope });
  if (identity.kind === 'pulsar') return PulsarBroker.connect({ webUrl: pulsarWebUrl(identity.url), tenant: identity.scope });
  throw new InvalidArgumentError(`unsupported broker kind ${JSON.stringify(identity.kind)}`);
}
