import type { Subscription } from 'rxjs';
import { topic, type Consumer } from '../../runtime/brokers/index.js';
import type { Store } from '../../storage/index.js';
import { feedDeliveries, ownerPriority, type ActorContext, type Deliveries, type StreamMarks, type StreamOutbox } from '../../index.js';
import type { Namespace } from '../namespaces.js';
import type { PartitionEnv } from './env.js';
import { openPartitionOutbox, partitionMarks } from './streams.js';

/** The resources of a partition actor that consumes one topic of its partition. */
export interface SubscribedState {
  readonly store: Store;
  readonly marks: StreamMarks;
  readonly consumer: Consumer;
  readonly feed: Subscription;
  /** Present when the actor sends messages (`withOutbox`). */
  readonly outbox?: StreamOutbox;
  /** With checkpoints (`env.checkpoints`): hands a committed batch's settle to the checkpointer (`ExactlyOnceContext.holdSettle`). */
  readonly holdSettle?: (consumer: Consumer, messages: number, settle: () => Promise<void>) => void;
}

/** Options of `openSubscribed`. */
export interface SubscribedOptions {
  /** Subscription name, applied-marks owner and outbox owner (e.g. `indexer`). */
  readonly owner: string;
  /** Namespace of the consumed topic (the topic is this partition's). */
  readonly namespace: Namespace;
  /** Unacked bound of the consumer. */
  readonly receiverQueueSize: number;
  readonly batching: { maxCount: number; maxDelayMs: number };
  /** Open an outbox with producer `<owner>@<partition>`. */
  readonly withOutbox: boolean;
}

/**
 * The `start()` shared by the indexer, backlinks and metric actors: acquires the partition
 * store, opens the outbox (replaying what a previous incarnation left), joins the failover
 * subscription `<owner>` on `<namespace>/<partition>` and feeds it into the mailbox. On
 * failure everything acquired so far is released before the error is rethrown.
 */
export async function openSubscribed(env: PartitionEnv, ctx: ActorContext<any>, options: SubscribedOptions): Promise<SubscribedState> {
  const store = await env.store.acquire();
  let outbox: StreamOutbox | undefined;
  try {
    if (options.withOutbox) {
      outbox = await openPartitionOutbox(env, store, options.owner);
    }
    const consumer = await env.broker.subscribe(topic(options.namespace, env.partition), {
      subscription: options.owner,
      type: 'failover',
      receiverQueueSize: options.receiverQueueSize,
      // A newer owner's consumer is the active one at once (a paused older owner's stays open).
      ...ownerPriority(env.fence),
    });
    const feed = feedDeliveries(consumer, (d: Deliveries) => ctx.self.tell(d), ctx.fail, options.batching);
    const checkpoints = env.checkpoints;
    const holdSettle = checkpoints ? (c: Consumer, messages: number, settle: () => Promise<void>) => checkpoints.hold(c, messages, settle, options.receiverQueueSize) : undefined;
    return { store, consumer, feed, marks: partitionMarks(store, options.owner), ...(outbox ? { outbox } : {}), ...(holdSettle ? { holdSettle } : {}) };
  } catch (err) {
    await outbox?.close();
    await env.store.release();
    throw err;
  }
}

/** The `stop()` matching `openSubscribed`: stops the feed, drops its held settles (redelivered), leaves the subscription, releases the store. */
export async function closeSubscribed(env: PartitionEnv, state: SubscribedState): Promise<void> {
  state.feed.unsubscribe();
  env.checkpoints?.dropHeld(state.consumer);
  await state.consumer.close();
  await state.outbox?.close();
  await env.store.release();
}
