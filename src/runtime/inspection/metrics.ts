import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { Subscription } from 'rxjs';
import type { ActorSystem } from '../actor/system.js';
import type { ActorStatus, TreeNode } from '../inspection.js';
import { actorLabels } from './actorLabels.js';
import type { NamespaceFlowSource, TopicFlowSource } from './flowSource.js';

/** Options of {@link createInspectionMetrics}. */
export interface InspectionMetricsOptions {
  /** Per-namespace sent/settled counts (the web index's `FlowCounters`); omit for none. */
  readonly flow?: NamespaceFlowSource;
  /** Per-topic sent/settled counts (a `TopicFlowCounters`); omit for no per-partition lag. */
  readonly topicFlow?: TopicFlowSource;
  /**
   * Also collect prom-client's default process metrics (`process_cpu_seconds_total`,
   * `process_resident_memory_bytes`, `nodejs_eventloop_lag_seconds`, ...). Default `false`:
   * they enable an event-loop delay monitor that is never disabled, so a library call that
   * may run many times (tests) keeps it off; the CLI turns it on once.
   */
  readonly processMetrics?: boolean;
  /** Register into this registry instead of a new one (an endpoint's own); never pass prom-client's global `register`. */
  readonly registry?: Registry;
}

/** A metrics registry bound to one actor system; see {@link createInspectionMetrics}. */
export interface InspectionMetrics {
  /** The endpoint's own registry (never prom-client's global one); add metrics to it freely. */
  readonly registry: Registry;
  /** Stops counting lifecycle events. Idempotent; scraping afterwards still reads the tree. */
  close(): void;
}

const ACTOR_LABELS = ['path', 'kind', 'partition'] as const;
const STATUSES: readonly ActorStatus[] = ['starting', 'running', 'failed', 'restarting', 'backoff', 'stopping', 'stopped'];

/**
 * A prom-client `Registry` (fresh unless `options.registry`) whose metrics are read at scrape time from `system.tree()` and
 * the flow sources (nothing is sampled in between, so a scrape is as current as `/tree`), plus
 * one counter fed by `system.events$`. Metric names and labels (documented in docs/console.md):
 *
 * | metric | type | labels | meaning |
 * |---|---|---|---|
 * | `shardflow_actor_messages_processed_total` | counter | path, kind, partition | `receive()` calls that completed, over all incarnations |
 * | `shardflow_actor_mailbox_depth` | gauge | path, kind, partition | messages waiting in the mailbox |
 * | `shardflow_actor_restarts_total` | counter | path, kind, partition | completed restarts |
 * | `shardflow_actor_messages_dropped_total` | counter | path, kind, partition | messages dropped by a full `drop-newest` mailbox |
 * | `shardflow_actors` | gauge | kind, status | live actors per kind and status (every status, 0 included) |
 * | `shardflow_lifecycle_events_total` | counter | type, kind | lifecycle events since the endpoint started (`failed`, `restarted`, ...) |
 * | `shardflow_broker_messages_sent_total` | counter | namespace | from `flow` |
 * | `shardflow_broker_messages_settled_total` | counter | namespace | from `flow` |
 * | `shardflow_broker_lag_messages` | gauge | namespace | sent - settled, from `flow` |
 * | `shardflow_broker_topic_lag_messages` | gauge | namespace, partition | sent - settled per topic, from `topicFlow`, clamped at 0 |
 *
 * `partition` is set only for actors under `/partitions/p<N>` (see `actorLabels`); `path` keeps
 * series of same-kind actors apart. Series of an actor that stopped for good disappear at the
 * next scrape; a counter that restarts from 0 (an actor created anew by its supervisor) is a
 * counter reset, which Prometheus' `rate()` handles.
 */
export function createInspectionMetrics(system: ActorSystem, options: InspectionMetricsOptions = {}): InspectionMetrics {
  const registry = options.registry ?? new Registry();
  const registers = [registry];

  /** Calls `visit` for every actor of a fresh snapshot, root included. */
  const eachActor = (visit: (node: TreeNode) => void): void => {
    const walk = (node: TreeNode): void => {
      visit(node);
      for (const child of node.children) walk(child);
    };
    walk(system.tree());
  };

  new Counter({
    name: 'shardflow_actor_messages_processed_total',
    help: 'Messages whose receive() completed, per actor, over all its incarnations.',
    labelNames: ACTOR_LABELS,
    registers,
    collect() {
      this.reset();
      eachActor((node) => this.inc(actorLabels(node.path, node.kind), node.processed));
    },
  });
  new Gauge({
    name: 'shardflow_actor_mailbox_depth',
    help: 'Messages waiting in the actor\'s mailbox (senders blocked by backpressure not counted).',
    labelNames: ACTOR_LABELS,
    registers,
    collect() {
      this.reset();
      eachActor((node) => this.set(actorLabels(node.path, node.kind), node.mailboxDepth));
    },
  });
  new Counter({
    name: 'shardflow_actor_restarts_total',
    help: 'Completed restarts (new incarnations started) per actor.',
    labelNames: ACTOR_LABELS,
    registers,
    collect() {
      this.reset();
      eachActor((node) => this.inc(actorLabels(node.path, node.kind), node.restarts));
    },
  });
  new Counter({
    name: 'shardflow_actor_messages_dropped_total',
    help: 'Messages dropped by a full drop-newest mailbox, per actor.',
    labelNames: ACTOR_LABELS,
    registers,
    collect() {
      this.reset();
      eachActor((node) => this.inc(actorLabels(node.path, node.kind), node.dropped));
    },
  });
  new Gauge({
    name: 'shardflow_actors',
    help: 'Live actors per kind and status.',
    labelNames: ['kind', 'status'] as const,
    registers,
    collect() {
      this.reset();
      const counts = new Map<string, Map<ActorStatus, number>>();
      eachActor((node) => {
        let byStatus = counts.get(node.kind);
        if (byStatus === undefined) counts.set(node.kind, (byStatus = new Map(STATUSES.map((s) => [s, 0]))));
        byStatus.set(node.status, (byStatus.get(node.status) ?? 0) + 1);
      });
      for (const [kind, byStatus] of counts) for (const [status, n] of byStatus) this.set({ kind, status }, n);
    },
  });

  const lifecycle = new Counter({
    name: 'shardflow_lifecycle_events_total',
    help: 'Lifecycle events seen since this endpoint started, per event type (without the @shardflow. prefix) and actor kind.',
    labelNames: ['type', 'kind'] as const,
    registers,
  });
  let subscription: Subscription | undefined = system.events$.subscribe((event) => {
    lifecycle.inc({ type: event.type.slice('@shardflow.'.length), kind: event.kind });
  });

  const flow = options.flow;
  if (flow !== undefined) {
    new Counter({
      name: 'shardflow_broker_messages_sent_total',
      help: 'Messages handed to the broker per namespace (outbox replays count again).',
      labelNames: ['namespace'] as const,
      registers,
      collect() {
        this.reset();
        for (const namespace of namespacesOf(flow)) this.inc({ namespace }, flow.sent.get(namespace) ?? 0);
      },
    });
    new Counter({
      name: 'shardflow_broker_messages_settled_total',
      help: 'Messages acked or dead-lettered per namespace.',
      labelNames: ['namespace'] as const,
      registers,
      collect() {
        this.reset();
        for (const namespace of namespacesOf(flow)) this.inc({ namespace }, flow.settled.get(namespace) ?? 0);
      },
    });
    new Gauge({
      name: 'shardflow_broker_lag_messages',
      help: 'Messages sent and not yet settled per namespace (sent - settled).',
      labelNames: ['namespace'] as const,
      registers,
      collect() {
        this.reset();
        for (const namespace of namespacesOf(flow)) this.set({ namespace }, (flow.sent.get(namespace) ?? 0) - (flow.settled.get(namespace) ?? 0));
      },
    });
  }

  const topicFlow = options.topicFlow;
  if (topicFlow !== undefined) {
    new Gauge({
      name: 'shardflow_broker_topic_lag_messages',
      help: 'Messages accepted by the broker and not yet acked or dead-lettered, per topic (namespace, partition); clamped at 0.',
      labelNames: ['namespace', 'partition'] as const,
      registers,
      collect() {
        this.reset();
        for (const t of topicFlow.topics()) this.set({ namespace: t.namespace, partition: t.partition }, Math.max(0, t.sent - t.settled));
      },
    });
  }

  if (options.processMetrics === true) collectDefaultMetrics({ register: registry });

  return {
    registry,
    close() {
      subscription?.unsubscribe();
      subscription = undefined;
    },
  };
}

/** Namespaces with a sent or a settled count, so that every series shows up with its 0s. */
function namespacesOf(flow: NamespaceFlowSource): Set<string> {
  return new Set([...flow.sent.keys(), ...flow.settled.keys()]);
}
