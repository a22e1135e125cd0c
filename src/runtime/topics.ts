import { InvalidArgumentError } from '../errors.js';
import type { PartitionId } from './ids.js';

/**
 * The one module that names topics: a topic is a partition id inside a namespace
 * (`NAMESPACE_NAME`), printed as `namespace/partition`.
 */

/**
 * A topic: `{ namespace, partition }`; printed as `namespace/partition`. The namespace is any
 * name a topology or an application declares (see `checkNamespaceName`).
 */
export interface Topic {
  readonly namespace: string;
  readonly partition: PartitionId;
}

/** The topic of `partition` in `namespace`. */
export function topic(namespace: string, partition: PartitionId): Topic {
  return { namespace, partition };
}

/**
 * Namespace names that every broker can carry as they are (a Redis key part, a Pulsar
 * namespace): 1 to 64 characters, lower-case letters, digits and `-`, starting with a letter.
 */
export const NAMESPACE_NAME = /^[a-z][a-z0-9-]{0,63}$/;

/** @throws InvalidArgumentError unless `name` matches `NAMESPACE_NAME`. */
export function checkNamespaceName(name: string): string {
  if (!NAMESPACE_NAME.test(name)) {
    throw new InvalidArgumentError(`namespace ${JSON.stringify(name)} must be 1 to 64 lower-case letters, digits or '-', starting with a letter`);
  }
  return name;
}

/**
 * Namespaces whose name starts with this are the framework's own (a cluster's ask requests and
 * replies, src/cluster/askWire.ts): `defineNamespace` refuses them, so an application's
 * topics never mix with them.
 */
export const RESERVED_NAMESPACE_PREFIX = 'sf-';

/** `crawl-requests/3`: the form used in logs, metrics labels and in-memory broker keys. */
export function topicName(t: Topic): string {
  return `${t.namespace}/${t.partition}`;
}
