import { InvalidArgumentError } from '../../errors.js';
import type { Codec } from '../codec.js';
import type { PartitionId } from '../ids.js';
import { keyPartitioner, type KeyPartitioner } from '../partitioner.js';
import { RESERVED_NAMESPACE_PREFIX, checkNamespaceName, topic, type Topic } from '../topics.js';

/**
 * A namespace of a topology: the typed channel between stages (Kafka Streams: a topic with
 * its serde and partitioning). Topics are `<name>/<partition>` for partition in
 * [0, partitions); a value goes to the partition of its key (`partitioner.forKey(key(value))`).
 * `T` is the type of its messages: a stage that reads it is handed `T`s, a stage that emits
 * to it must give `T`s.
 */
export interface NamespaceDef<T> {
  readonly name: string;
  readonly codec: Codec<T>;
  readonly partitioner: KeyPartitioner;
  /** The routing key of a value, e.g. `(click) => click.host`. */
  readonly key: (value: T) => string;
  /** The partition `value` goes to. @throws whatever `key` throws */
  partitionOf(value: T): PartitionId;
  /** The topic `value` goes to. */
  topicOf(value: T): Topic;
}

/** Options of {@link defineNamespace}. */
export interface NamespaceOptions<T> {
  /** Encodes and checks values (`msgpackCodec(name, guard)`); undecodable messages are dead-lettered with the codec's reason. */
  readonly codec: Codec<T>;
  /** Partition count, an integer >= 1. */
  readonly partitions: number;
  /** Routing key of a value: every value with one key lands on one partition, in every process. */
  readonly key: (value: T) => string;
}

/**
 * Declares a namespace.
 * @param name 1 to 64 lower-case letters, digits or `-`, starting with a letter (a Redis key part and a Pulsar namespace);
 *   not starting with `sf-` (`RESERVED_NAMESPACE_PREFIX`: the framework's own topics)
 * @throws InvalidArgumentError for a bad or reserved name, or a bad partition count
 * @example
 * const clicks = defineNamespace('clicks', { codec: msgpackCodec('Click', isClick), partitions: 8, key: (c) => c.host });
 */
export function defineNamespace<T>(name: string, options: NamespaceOptions<T>): NamespaceDef<T> {
  checkNamespaceName(name);
  if (name.startsWith(RESERVED_NAMESPACE_PREFIX)) {
    throw new InvalidArgumentError(`namespace ${JSON.stringify(name)}: names starting with ${JSON.stringify(RESERVED_NAMESPACE_PREFIX)} are reserved for the framework (a cluster's ask topics)`);
  }
  if (!Number.isInteger(options.partitions) || options.partitions < 1 || options.partitions > 65536) {
    throw new InvalidArgumentError(`namespace ${name}: partitions must be an integer in [1, 65536], got ${options.partitions}`);
  }
  const partitioner = keyPartitioner(options.partitions);
  const key = options.key;
  const partitionOf = (value: T): PartitionId => partitioner.forKey(key(value));
  return Object.freeze({
    name,
    codec: options.codec,
    partitioner,
    key,
    partitionOf,
    topicOf: (value: T) => topic(name, partitionOf(value)),
  });
}
