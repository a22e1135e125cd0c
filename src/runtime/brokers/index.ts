/**
 * `shardflow/brokers`: the broker interface, its three implementations, the interceptors
 * written once for all of them, and broker scopes (a run's Redis key prefix or Pulsar tenant).
 * See docs/brokers.md.
 *
 * @module shardflow/brokers
 */

// The interface
export type {
  Broker,
  BrokerMessage,
  Consumer,
  DeadLetter,
  Producer,
  ProducerOptions,
  SendOptions,
  SubscribeOptions,
  SubscriptionType,
} from './broker.js';

// Implementations
export { MemoryBroker } from './memory.js';
export { DEFAULT_MAX_RETAINED_PER_TOPIC } from './memory.js';
export type { MemoryBrokerOptions } from './memory.js';
export type { RawFields } from './internal/malformed.js';
export { RedisStreamsBroker } from './redis-streams.js';
export type { RedisStreamsBrokerOptions } from './redis-streams.js';
export { PulsarBroker } from './pulsar/broker.js';
export type { PulsarBrokerOptions } from './pulsar/broker.js';

// Connecting by address, and a run's scope
export { connectBroker, freshBrokerIdentity } from './connect.js';
export type { BrokerIdentity } from './identity.js';
export { deleteBrokerScope, describeBrokerScope, listBrokerScopes, BrokerScopeInUseError } from './scope.js';
export { brokerKind } from './scope.js';
export type { BrokerScopeOptions, BrokerScopeRemoval, BrokerScopeContents } from './scope.js';

// Interceptors (batching, compression), composed around any producer or consumer
export { composeConsumer, composeProducer } from './interceptors/compose.js';
export type { Interceptor } from './interceptors/compose.js';
export { batching } from './interceptors/batching.js';
export type { BatchingOptions } from './interceptors/batching.js';
export { compression } from './interceptors/compression.js';
export type { CompressionCodec, CompressionOptions } from './interceptors/compression.js';

// Topics
export { topic, topicName, checkNamespaceName, NAMESPACE_NAME } from '../topics.js';
export type { Topic } from '../topics.js';
