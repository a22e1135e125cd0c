/**
 * Where a run's messages live on a broker: the broker kind and the scope its topics are
 * under (the Redis key prefix, or the Pulsar tenant; none for the in-memory broker).
 *
 * ```
 * { kind: 'memory' }
 * { kind: 'redis',  url: 'redis://127.0.0.1:6379',  scope: 'sf:1a2b3c4d:' }       keys sf:1a2b3c4d:links/3, ...
 * { kind: 'pulsar', url: 'pulsar://127.0.0.1:8080', scope: 'shardflow-1a2b3c4d' }  topics persistent://shardflow-1a2b3c4d/links/3, ...
 * ```
 * A data dir records it (a topology's `topology.json`, see `readTopologyRecord` and
 * `brokerIdentityFor`; the web index's `shardflow.json`) so that the next run on the data dir
 * reopens the same scope, and so that `shardflow clean` can remove it (`deleteBrokerScope`).
 */
export interface BrokerIdentity {
  /** `memory`, `redis` or `pulsar`. */
  readonly kind: string;
  /** The broker's address as given (`redis://host:port[/db]`, `pulsar://host:port` with Pulsar's HTTP port); absent for memory. */
  readonly url?: string;
  /** Redis key prefix (`sf:<run>:`) or Pulsar tenant (`shardflow-<run>`); absent for memory. */
  readonly scope?: string;
}

/**
 * The names of the scopes the CLI gives its runs (`freshBrokerIdentity` in src/cli/options.ts):
 * `<family><run>:` on Redis, `<family><run>` on Pulsar, `<run>` being RUN_ID_PATTERN.
 * `shardflow clean --orphans` looks for scopes of this shape.
 */
export const SCOPE_FAMILY = Object.freeze({ redis: 'sf:', pulsar: 'shardflow-' } as const);

/** A run id inside a scope name: 8 lowercase hex digits (the start of a random UUID). */
export const RUN_ID_PATTERN = '[0-9a-f]{8}';
