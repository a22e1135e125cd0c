/**
 * Cumulative message counts per broker namespace, as kept by `FlowCounters`
 * (`src/runtime/stream/flowCounters.ts`), which satisfies this shape as it is. Declared here so that the
 * runtime's inspection endpoint does not import the web-index actors.
 *
 * Both maps are keyed by namespace (`crawl-requests`, `fetches`, `links`, `metrics`) and hold
 * message counts since the process started: `sent` counts messages handed to the broker
 * (outbox replays count again), `settled` counts messages acked or dead-lettered.
 */
export interface NamespaceFlowSource {
  readonly sent: ReadonlyMap<string, number>;
  readonly settled: ReadonlyMap<string, number>;
}

/** Cumulative counts of one topic (`namespace/partition`); see {@link TopicFlowSource}. */
export interface TopicFlow {
  /** Broker namespace, e.g. `links`. */
  readonly namespace: string;
  /** Partition number as a decimal string, e.g. `'3'`. */
  readonly partition: string;
  /** Messages the broker accepted on this topic (send resolved). */
  readonly sent: number;
  /** Messages acked or dead-lettered on this topic, over all its subscriptions. */
  readonly settled: number;
}

/** Per-topic counts, e.g. a `TopicFlowCounters` that wraps the broker (see `topicFlow.ts`). */
export interface TopicFlowSource {
  /** A point-in-time list of every topic seen so far. */
  topics(): Iterable<TopicFlow>;
}
