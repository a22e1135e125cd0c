/**
 * The web index's namespaces (a topic is a partition id inside one, `topic(namespace, p)` in
 * `shardflow/brokers`), following the message flow of docs/ARCHITECTURE.md:
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

/** One of the web index's four namespaces. */
export type Namespace = (typeof Namespaces)[keyof typeof Namespaces];
