import type { Topic } from '../../topics.js';

/**
 * Pulsar names of our topics: the one place that builds them.
 *
 * ```
 * topic links/3, tenant shardflow    -> persistent://shardflow/links/3
 * WebSocket path                     -> persistent/shardflow/links/3
 * dead letters of subscription "bl"  -> persistent://shardflow/links/3-bl-DLQ (Pulsar's own naming)
 * ```
 */
export interface PulsarTopicName {
  readonly tenant: string;
  readonly namespace: string;
  /** Local name inside the namespace, e.g. `3` or `3-bl-DLQ`. */
  readonly local: string;
}

/** The Pulsar topic of `topic` under `tenant`. */
export function pulsarTopic(tenant: string, topic: Topic): PulsarTopicName {
  return { tenant, namespace: topic.namespace, local: String(topic.partition) };
}

/** The dead-letter topic of `subscription` on `topic` (`<topic>-<subscription>-DLQ`). */
export function deadLetterTopic(tenant: string, topic: Topic, subscription: string): PulsarTopicName {
  return { tenant, namespace: topic.namespace, local: `${topic.partition}-${subscription}-DLQ` };
}

/** `persistent://tenant/ns/local`. */
export function fullName(t: PulsarTopicName): string {
  return `persistent://${t.tenant}/${t.namespace}/${t.local}`;
}

/** `persistent/tenant/ns/local`, URL-encoded per segment (WebSocket and admin paths). */
export function topicPath(t: PulsarTopicName): string {
  return ['persistent', t.tenant, t.namespace, t.local].map(encodeURIComponent).join('/');
}

/** Message properties carrying what the Broker interface needs beyond the payload. */
export const Props = Object.freeze({
  producer: 'sf-producer',
  sequence: 'sf-sequence',
  reason: 'sf-reason',
  origin: 'sf-origin',
  redeliveryCount: 'sf-redelivery-count',
  publishTime: 'sf-publish-time',
  /** `1` on a dead letter of a message that was not one of ours (see `internal/malformed.ts`). */
  malformed: 'sf-malformed',
} as const);

/**
 * Subscription property that marks the subscription's lifetime: set by the first consumer
 * (random value), gone when Pulsar recreates the subscription after it or its topic was
 * deleted (the WebSocket proxy resubscribes silently), which is how a consumer notices.
 */
export const INCARNATION = 'sf-incarnation';
