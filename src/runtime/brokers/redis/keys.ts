import { topicName, type Topic } from '../../topics.js';

/**
 * The Redis keys of one topic and subscription: the one place that names them.
 *
 * ```
 * sf:links/3                      stream of the topic (XADD; a consumer group per subscription)
 * sf:links/3:backlinks:dlq        dead letters of subscription "backlinks" (stream)
 * sf:links/3:backlinks:ready      ids due for redelivery, score = due ms (sorted set)
 * sf:links/3:backlinks:lock       active consumer of an exclusive/failover subscription
 * sf:links/3:backlinks:meta       subscription type (hash, field "type")
 * sf:links/3:backlinks:alive:<c>  liveness of consumer <c> (string with a PX expiry)
 * ```
 * `sf:` is the default prefix (`RedisStreamsBrokerOptions.prefix`).
 */
export interface SubscriptionKeys {
  readonly stream: string;
  readonly dlq: string;
  readonly ready: string;
  readonly lock: string;
  readonly meta: string;
  /** Prefix of the liveness keys; append the consumer name. */
  readonly alivePrefix: string;
}

/** Stream key of `topic`: `<prefix><namespace>/<partition>`. */
export function streamKey(prefix: string, topic: Topic): string {
  return `${prefix}${topicName(topic)}`;
}

/** All keys of `subscription` on `topic`. */
export function subscriptionKeys(prefix: string, topic: Topic, subscription: string): SubscriptionKeys {
  const stream = streamKey(prefix, topic);
  const sub = `${stream}:${subscription}`;
  return {
    stream,
    dlq: `${sub}:dlq`,
    ready: `${sub}:ready`,
    lock: `${sub}:lock`,
    meta: `${sub}:meta`,
    alivePrefix: `${sub}:alive:`,
  };
}
