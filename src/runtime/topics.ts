import type { PartitionId } from './ids.js';

/**
 * The one module that names topics. A topic is a partition id inside a namespace; the
 * namespaces follow the message flow of DESIGN.md:
 *
 * ```
 * crawl-requests/<p> -> crawler -> fetches/<p> -> indexer -> links/<q> -> backlinks
 *                                                         metrics/<q> <- metric actor of p
 * ```
 */
export const Namespaces = Object.freeze({
  crawlRequests: 'crawl-requests',
  fetches: 'fetches',
  links: 'links',
  metrics: 'metrics',
} as const);

/** One of the four namespaces. */
export type Namespace = (typeof Namespaces)[keyof typeof Namespaces];

/** A topic: `{ namespace, partition }`; printed as `namespace/partition`. */
export interface Topic {
  readonly namespace: Namespace;
  readonly partition: PartitionId;
}

/** The topic of `partition` in `namespace`. */
export function topic(namespace: Namespace, partition: PartitionId): Topic {
  return { namespace, partition };
}

/** `crawl-requests/3`: the form used in logs, metrics labels and in-memory broker keys. */
export function topicName(t: Topic): string {
  return `${t.namespace}/${t.partition}`;
}
