import { randomBytes, randomInt } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Subscription } from 'rxjs';
import { AskTimeoutError, BrokerClosedError, InvalidArgumentError, RemoteAskError, isShardflowError } from '../errors.js';
import { consoleLogger, type Logger } from '../runtime/actor/logger.js';
import type { Broker, BrokerMessage, Consumer, DeadLetter, Producer } from '../runtime/brokers/broker.js';
import { partitionId, producerId } from '../runtime/ids.js';
import { topic } from '../runtime/topics.js';
import { keyPartitioner } from '../runtime/partitioner.js';
import { ASK_REPLY_SLOTS, ASK_REPLY_SUBSCRIPTION, askReplyCodec, askRequestCodec, askTopic, replyTopic, STAGE_FLOW_REQUEST, type AskReply } from './askWire.js';
import { unappliedStreams, waitStreamsQuiet, type FlowCollection, type QuietReport, type SentStream, type StreamFlowReport, type StreamReceiver } from '../runtime/stream/flowReport.js';
import { DEFAULT_QUIESCENCE_TIMEOUT_MS } from '../runtime/topology/running.js';
import { ClusterKeys } from './keys.js';
import { readClusterTopology } from './membership.js';
import { askCoordination, connectCoordination } from './redisConnection.js';
import { readClusterStatus, type ClusterStatus } from './status.js';
import type { ClusterStage } from './units.js';
import type { StageTypes } from '../runtime/topology/topology.js';

/** Default wait of a remote ask for its answer: 10 minutes (an application's ask may wait on a barrier that long). */
export const DEFAULT_REMOTE_ASK_TIMEOUT_MS = 10 * 60_000;
/** The least a quiescence's collection waits for each flow report, ms: its end may pass `timeoutMs` by that much. */
const QUIESCENCE_LAST_ASK_MS = 1000;
/** Longest `timeoutMs` (setTimeout's bound, about 24.8 days). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** Options of {@link connectClusterClient}. */
export interface ClusterClientOptions {
  /** Redis URL of the cluster's coordination, as the workers were given: `redis://host:port[/db]`. */
  readonly cluster: string;
  readonly clusterName: string;
  /** The cluster's broker scope, as the workers use it (`clusterBrokerIdentity(spec, clusterName)`); the caller closes it after `close()`. */
  readonly broker: Broker;
  /** Prefix of the cluster's Redis keys (default `sfc:`). */
  readonly keyPrefix?: string;
  /** Hears of replies that do not decode (dead-lettered) and of answers after a timeout (dropped). Default `consoleLogger`. */
  readonly logger?: Logger;
}

/** Options of {@link ClusterClient.ask}. */
export interface RemoteAskOptions {
  /** How long to wait for the answer, in ms (default 10 minutes; at most 2^31 - 1). The request also expires then: an owner that consumes it later acks it without running it. */
  readonly timeoutMs?: number;
}

/** Options of {@link ClusterClient.quiescence}. */
export interface ClusterQuiescenceOptions {
  /**
   * Streams of producers that keep no store, checked against their receivers' marks too: an
   * ingest's `TopologyProducer.sent()`. Without them, only what the partitions' outboxes
   * committed is waited for, not the input itself.
   */
  readonly external?: Iterable<SentStream>;
  /** Give up after this many ms (default `DEFAULT_QUIESCENCE_TIMEOUT_MS`, 5 minutes). */
  readonly timeoutMs?: number;
  /** Ms between two collections of the partitions' reports (default 100). */
  readonly pollMs?: number;
  readonly signal?: AbortSignal;
}

/** Options of {@link ClusterClient.askKey}. */
export interface RemoteAskKeyOptions extends RemoteAskOptions {
  /**
   * How keys map to the stage's partitions, for a stage whose recorded partitioner is not
   * `fnv1a/N` (an application's stages, e.g. the web index's host partitioning). A topology's
   * stages need none: their namespaces' partitioner is recorded.
   */
  readonly partitioner?: { forKey(key: string): number };
}

/**
 * Asks a cluster's partitions, wherever they run, through the broker (docs/cluster.md,
 * "Asking partitions across the cluster"). `S` types the asks by the stages' query hooks as
 * `RunningTopology<S>` does: `connectClusterClient<StagesOf<typeof topology>>(…)`; without it,
 * any stage name, requests and answers `unknown`.
 */
export interface ClusterClient<S extends Record<string, StageTypes> = Record<string, StageTypes>> {
  /** This client's reply slot: its answers arrive on the topic `sf-reply/<replySlot>`. */
  readonly replySlot: number;
  /**
   * Asks partition `partition` of `stage`: publishes the request on the unit's request topic
   * (`sf-ask-<stage>/<partition>`); whichever worker owns the unit when the request is
   * consumed runs `ApplicationHost.ask(stage, partition, request)` and answers. A unit with no
   * owner yet keeps the request in the broker until one starts (within `timeoutMs`). A
   * request can run twice (its owner stopped or died while it ran: the next owner runs it
   * again), so what it does must be idempotent; the second answer is dropped.
   * `request` and the answer are plain data (msgpack).
   * @returns the answer
   * @throws RemoteAskError with the remote error's name, code and message; AskTimeoutError
   *   after `timeoutMs`; InvalidArgumentError for a stage the cluster does not have or a bad
   *   `timeoutMs`; RangeError for a partition outside the stage's; BrokerClosedError after
   *   `close()` (also for the asks still waiting then); the broker's send errors
   */
  ask<N extends keyof S & string>(stage: N, partition: number, request: S[N]['request'], options?: RemoteAskOptions): Promise<S[N]['answer']>;
  /**
   * `ask` of every partition of `stage` (concurrently), answers in partition order.
   * @throws as `ask` (the first failure); InvalidArgumentError before any worker joined (the stages are not recorded yet)
   */
  askAll<N extends keyof S & string>(stage: N, request: S[N]['request'], options?: RemoteAskOptions): Promise<Array<S[N]['answer']>>;
  /**
   * `ask` of the partition of `stage` that holds `key`, as `running.askKey` in one process:
   * the stage's input namespace's partitioner (recorded with the cluster's stages, `fnv1a/N`
   * for a topology) gives the partition.
   * @throws as `ask`; InvalidArgumentError before any worker joined, for a stage the cluster
   *   does not have, or for a stage whose partitioner is not recorded as `fnv1a/N` and no
   *   `options.partitioner` is given
   */
  askKey<N extends keyof S & string>(stage: N, key: string, request: S[N]['request'], options?: RemoteAskKeyOptions): Promise<S[N]['answer']>;
  /**
   * Waits until a topology's streams are quiet across the cluster, as `running.quiescence()`
   * does in one process: every message each partition's outbox committed, and every stream of
   * `options.external`, applied by every stage that consumes its namespace, in two consecutive
   * identical collections of every partition's flow report (`STAGE_FLOW_REQUEST`, answered by
   * the partition's owner from its store: `waitStreamsQuiet`). The reports come from the
   * stores, so the wait holds across moves and restarts: a partition restored from a
   * checkpoint reports what its store holds. A unit with no owner yet holds the collection
   * until one starts. Dead-lettered messages count as applied (their marks move past them).
   * @returns what the last collection saw
   * @throws JobStalledError after `timeoutMs` (up to a second more: the last collection's
   *   asks), naming the streams not applied (producer, topic,
   *   sent, applied) and the partitions that did not report (unowned, or their owner stopped);
   *   InvalidArgumentError for an `external` stream that is malformed or that no stage
   *   receives (it would be left out of the wait); InvalidArgumentError before any worker joined, or for a bad timeoutMs;
   *   RemoteAskError from an application whose partitions do not answer the flow request (the
   *   web index has its own, `waitClusterQuiet`); the abort reason; as `ask`
   */
  quiescence(options?: ClusterQuiescenceOptions): Promise<QuietReport>;
  /**
   * The messages `stage` dead-lettered over all its partitions, with their reasons, oldest
   * first per partition, as `running.deadLetters(stage)` in one process: read from the
   * broker (the dead-letter topic of the stage's subscription on each input topic), so it
   * needs no worker and counts what every owner, past or present, dead-lettered.
   * @throws InvalidArgumentError before any worker joined, or for a stage the cluster does not
   *   have; the broker's errors
   */
  deadLetters(stage: string): Promise<DeadLetter[]>;
  /** The cluster's status (`clusterStatus`), with this client's broker for the backlogs. */
  status(): Promise<ClusterStatus>;
  /**
   * Records `value` under `name` for the cluster unless a value is recorded there already
   * (atomically: Redis `SET NX`, as ZooKeeper's create of a node that must not exist), and
   * returns the value recorded: `value` when this call or an earlier one with the same value
   * recorded it, another when another client got there first. What an application's clients
   * agree on once for the cluster's life (the web index: which graph it ranks), so that two
   * clients that check and then act cannot both win. Kept until `retireCluster`.
   * @param name 1 to 128 letters, digits, `.`, `_`, `-`, `/`
   * @throws InvalidArgumentError for a bad name; BrokerDisconnectedError when the cluster's Redis does not answer
   */
  claim(name: string, value: string): Promise<string>;
  /**
   * Stops: rejects the asks still waiting with BrokerClosedError, closes the reply consumer,
   * the request producers and the Redis connection. The reply topic and its subscription
   * are left in the broker scope (the Broker interface deletes no topic): its answers are
   * acked and trimmed, and it goes with the scope (`deleteBrokerScope`). Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Connects a client to a cluster's partitions: reads its stages from the cluster's Redis and
 * subscribes to a reply topic of its own (`sf-reply/<slot>`, a random slot in [0, 2^48 - 1),
 * exclusive subscription; a slot held by another live client is drawn again).
 * The type parameter types the asks (`StagesOf<typeof topology>`: the stages of the topology
 * the workers run); it is not checked against the cluster's stages, whose names `ask` checks.
 * @throws InvalidArgumentError for a bad cluster name; BrokerDisconnectedError when the
 *   cluster's Redis or the broker does not answer
 */
export async function connectClusterClient<S extends Record<string, StageTypes> = Record<string, StageTypes>>(options: ClusterClientOptions): Promise<ClusterClient<S>> {
  const keys = new ClusterKeys(options.clusterName, options.keyPrefix);
  const redis = await connectCoordination(options.cluster, 5000);
  try {
    const stages = await readClusterTopology(redis, keys);
    for (let attempt = 1; ; attempt++) {
      const slot = randomInt(0, ASK_REPLY_SLOTS);
      try {
        const consumer = await options.broker.subscribe(replyTopic(slot), { subscription: ASK_REPLY_SUBSCRIPTION, type: 'exclusive' });
        return new RemoteAskClient(options, redis, keys, slot, consumer, stages) as ClusterClient as ClusterClient<S>;
      } catch (err) {
        if (attempt >= 3 || !(isShardflowError(err) && err.code === 'SF_ERR_INVALID_ARGUMENT')) throw err;
      }
    }
  } catch (err) {
    redis.disconnect();
    throw err;
  }
}

interface Waiting {
  readonly stage: string;
  readonly partition: number;
  readonly resolve: (answer: unknown) => void;
  readonly reject: (err: unknown) => void;
  readonly timer: NodeJS.Timeout;
}

/**
 * The `external` streams of a quiescence, checked: each names a producer, a topic
 * `<namespace>/<p>` that some stage of the cluster consumes (p within its partitions) and a
 * next sequence >= 0. A stream nobody receives would be left out of the wait in silence.
 * @throws InvalidArgumentError naming the first bad one
 */
function checkExternal(external: Iterable<SentStream> | undefined, stages: readonly ClusterStage[], cluster: string): SentStream[] {
  if (external === undefined) return [];
  if (typeof (external as { [Symbol.iterator]?: unknown })[Symbol.iterator] !== 'function') throw new InvalidArgumentError(`quiescence: external must be an iterable of { producer, topic, next } (TopologyProducer.sent()), got ${typeof external}`);
  const out: SentStream[] = [];
  for (const e of external) {
    const x = (e ?? {}) as Partial<SentStream>;
    const slash = typeof x.topic === 'string' ? x.topic.lastIndexOf('/') : -1;
    const ns = slash > 0 ? x.topic!.slice(0, slash) : undefined;
    const p = slash > 0 ? Number(x.topic!.slice(slash + 1)) : NaN;
    const consumed = stages.filter((st) => st.namespace === ns);
    const why = typeof x.producer !== 'string' || x.producer.length === 0 ? 'no producer name'
      : !Number.isSafeInteger(x.next) || x.next! < 0 ? 'next is not an integer >= 0'
        : ns === undefined || !/^\d+$/.test(x.topic!.slice(slash + 1)) ? 'its topic is not <namespace>/<partition>'
          : consumed.length === 0 ? `no stage consumes namespace ${ns} (stages: ${stages.map((st) => `${st.name} <- ${st.namespace}`).join(', ')})`
            : consumed.every((st) => p >= st.partitions) ? `namespace ${ns} has ${consumed[0]!.partitions} partitions`
              : undefined;
    if (why !== undefined) throw new InvalidArgumentError(`quiescence of cluster ${cluster}: external stream ${JSON.stringify(e)?.slice(0, 200)}: ${why}`);
    out.push({ producer: x.producer!, topic: x.topic!, next: x.next! });
  }
  return out;
}

/** First wait before the reply subscription is joined again after its consumer failed, ms (doubling to REPLY_RESUBSCRIBE_MAX_MS). */
const REPLY_RESUBSCRIBE_MIN_MS = 250;
const REPLY_RESUBSCRIBE_MAX_MS = 10_000;

class RemoteAskClient implements ClusterClient {
  readonly #waiting = new Map<string, Waiting>();
  readonly #producers = new Map<string, Promise<Producer>>();
  #consumer: Consumer;
  #feed: Subscription | undefined;
  readonly #logger: Logger;
  #stages: ClusterStage[] | undefined;
  #closing: Promise<void> | undefined;

  constructor(
    readonly options: ClusterClientOptions,
    readonly redis: Redis,
    readonly keys: ClusterKeys,
    readonly replySlot: number,
    consumer: Consumer,
    stages: ClusterStage[] | undefined,
  ) {
    this.#stages = stages;
    this.#logger = options.logger ?? consoleLogger;
    this.#consumer = consumer;
    this.#follow(consumer);
  }

  /** Takes the replies of `consumer`; when it fails, joins the reply subscription again. */
  #follow(consumer: Consumer): void {
    this.#consumer = consumer;
    this.#feed = consumer.messages$.subscribe({
      next: (m) => void this.#onReply(m, consumer),
      error: (err: unknown) => {
        if (this.#closing) return;
        this.#logger.warn({ cluster: this.keys.clusterName, err }, 'the cluster client\'s reply consumer failed (a broker outage longer than its reconnect timeout): joining its reply subscription again; answers sent meanwhile wait there');
        void this.#resubscribe();
      },
    });
  }

  /**
   * Joins the reply subscription of this client's slot again, with backoff, until it succeeds
   * or the client closes (found by a new user: after a 60 s broker outage a query server's
   * client never read a reply again, and every read waited out its timeout). The subscription
   * is durable, so answers published while no consumer read it are delivered then.
   */
  async #resubscribe(): Promise<void> {
    await this.#consumer.close().catch(() => {});
    for (let delay = REPLY_RESUBSCRIBE_MIN_MS; !this.#closing; delay = Math.min(delay * 2, REPLY_RESUBSCRIBE_MAX_MS)) {
      await new Promise((resolve) => setTimeout(resolve, delay).unref());
      if (this.#closing) return;
      try {
        const consumer = await this.options.broker.subscribe(replyTopic(this.replySlot), { subscription: ASK_REPLY_SUBSCRIPTION, type: 'exclusive' });
        if (this.#closing) {
          await consumer.close();
          return;
        }
        this.#follow(consumer);
        this.#logger.warn({ cluster: this.keys.clusterName }, 'the cluster client\'s reply consumer is back');
        return;
      } catch (err) {
        this.#logger.debug({ cluster: this.keys.clusterName, err }, 'the cluster client\'s reply subscription is not joined yet');
      }
    }
  }

  async ask(stage: string, partition: number, request: unknown, options: RemoteAskOptions = {}): Promise<unknown> {
    if (this.#closing) throw new BrokerClosedError('the cluster client is closed');
    const timeoutMs = options.timeoutMs ?? DEFAULT_REMOTE_ASK_TIMEOUT_MS;
    if (!(Number.isInteger(timeoutMs) && timeoutMs > 0 && timeoutMs <= MAX_TIMEOUT_MS)) {
      throw new InvalidArgumentError(`timeoutMs must be an integer in [1, ${MAX_TIMEOUT_MS}], got ${timeoutMs}`);
    }
    await this.#checkUnit(stage, partition);
    const id = randomBytes(16).toString('hex');
    const payload = askRequestCodec.encode({ id, replyTo: this.replySlot, stage, partition, expiresAt: Date.now() + timeoutMs, request });
    const answer = new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(id);
        // Why, when the cluster's status knows (found by a new user: a partition refused for a
        // missing checkpoint timed out as "unowned, or its owner busy").
        void this.#unitState(stage, partition).then((why) =>
          reject(new AskTimeoutError(`cluster ${this.keys.clusterName}: no answer from ${stage}/${partition} within ${timeoutMs} ms (${why ?? 'no worker ran it: the unit unowned, or its owner busy'})`)),
        );
      }, timeoutMs);
      this.#waiting.set(id, { stage, partition, resolve, reject, timer });
    });
    // Marked handled before the send: a send slower than the timeout (a broker stalled) would
    // otherwise leave the timeout's rejection unhandled, which ends the process (it is still
    // thrown to the caller below).
    answer.catch(() => {});
    try {
      await (await this.#producer(stage, partition)).send(payload);
    } catch (err) {
      const w = this.#waiting.get(id);
      if (w) {
        clearTimeout(w.timer);
        this.#waiting.delete(id);
      }
      throw err;
    }
    return answer;
  }

  async askAll(stage: string, request: unknown, options?: RemoteAskOptions): Promise<unknown[]> {
    const s = (await this.#readStages(true))?.find((x) => x.name === stage);
    if (!this.#stages) throw new InvalidArgumentError(`cluster ${this.keys.clusterName} has no recorded stages yet (no worker joined): askAll cannot tell the partitions of ${stage}`);
    if (!s) throw new InvalidArgumentError(`cluster ${this.keys.clusterName} has no stage ${JSON.stringify(stage)} (its stages: ${this.#stages.map((x) => x.name).join(', ')})`);
    return Promise.all(Array.from({ length: s.partitions }, (_, p) => this.ask(stage, p, request, options)));
  }

  async askKey(stage: string, key: string, request: unknown, options: RemoteAskKeyOptions = {}): Promise<unknown> {
    const s = (await this.#readStages(true))?.find((x) => x.name === stage);
    if (!this.#stages) throw new InvalidArgumentError(`cluster ${this.keys.clusterName} has no recorded stages yet (no worker joined): askKey cannot tell the partitions of ${stage}`);
    if (!s) throw new InvalidArgumentError(`cluster ${this.keys.clusterName} has no stage ${JSON.stringify(stage)} (its stages: ${this.#stages.map((x) => x.name).join(', ')})`);
    let partitioner = options.partitioner;
    if (!partitioner) {
      if (s.partitioner !== `fnv1a/${s.partitions}`) {
        throw new InvalidArgumentError(`stage ${stage} of cluster ${this.keys.clusterName} records ${s.partitioner ? `partitioner ${s.partitioner}` : 'no partitioner'}: give askKey options.partitioner`);
      }
      partitioner = keyPartitioner(s.partitions);
    }
    const { timeoutMs } = options;
    return this.ask(stage, partitioner.forKey(key), request, timeoutMs !== undefined ? { timeoutMs } : {});
  }

  async quiescence(options: ClusterQuiescenceOptions = {}): Promise<QuietReport> {
    const stages = await this.#readStages(true);
    if (!stages) throw new InvalidArgumentError(`cluster ${this.keys.clusterName} has no recorded stages yet (no worker joined): quiescence cannot tell its partitions`);
    const timeoutMs = options.timeoutMs ?? DEFAULT_QUIESCENCE_TIMEOUT_MS;
    if (!(timeoutMs > 0)) throw new InvalidArgumentError(`timeoutMs must be > 0, got ${timeoutMs}`);
    const deadline = Date.now() + timeoutMs;
    // Report i of a collection: stage by stage, partition by partition.
    const offsets = new Map<string, number>();
    let n = 0;
    for (const st of stages) {
      offsets.set(st.name, n);
      n += st.partitions;
    }
    // Who receives a topic `<namespace>/<p>`: each stage consuming the namespace (its marks are named after it).
    const consumers = (topic: string): StreamReceiver[] => {
      const slash = topic.lastIndexOf('/');
      const ns = topic.slice(0, slash);
      const p = Number(topic.slice(slash + 1));
      return stages.filter((st) => st.namespace === ns && p < st.partitions).map((st) => ({ report: offsets.get(st.name)! + p, consumer: st.name }));
    };
    const external = checkExternal(options.external, stages, this.keys.clusterName);
    const collect = async (): Promise<FlowCollection> => {
      // A partition that does not answer within what is left of timeoutMs (at least
      // QUIESCENCE_LAST_ASK_MS, so that a collection begun just before the deadline still
      // reads the partitions that do answer) has no report: its streams count as unapplied,
      // and it is named as busy (unowned, or its owner stopped).
      const askMs = Math.max(Math.min(QUIESCENCE_LAST_ASK_MS, timeoutMs), Math.min(MAX_TIMEOUT_MS, deadline - Date.now()));
      const busy: string[] = [];
      const reports = (await Promise.all(stages.flatMap((st) => Array.from({ length: st.partitions }, (_, p) => this.ask(st.name, p, STAGE_FLOW_REQUEST, { timeoutMs: askMs }).catch((err: unknown) => {
        if (!(err instanceof AskTimeoutError)) throw err;
        // The ask's error says why when the cluster's status knows (a refused partition).
        busy.push(`${st.name}/${p} did not report its flow: ${err.message}`);
        return undefined;
      }))))) as Array<StreamFlowReport | undefined>;
      // The first consumer of each topic is waitStreamsQuiet's; the others (a namespace several stages consume) are checked here.
      for (let k = 1; stages.some((st) => stages.filter((o) => o.namespace === st.namespace).length > k); k++) {
        for (const u of unappliedStreams(reports, { receiver: (topic) => consumers(topic)[k], external })) {
          busy.push(`${u.producer ?? '(unknown producer)'} -> ${u.topic} (stage ${u.receiver.consumer}): sent ${u.sent}, applied ${u.applied}`);
        }
      }
      return { reports, busy };
    };
    return waitStreamsQuiet(collect, { receiver: (topic) => consumers(topic)[0], external, pollMs: options.pollMs ?? 100, timeoutMs, ...(options.signal ? { signal: options.signal } : {}) });
  }

  async deadLetters(stage: string): Promise<DeadLetter[]> {
    const s = (await this.#readStages(true))?.find((x) => x.name === stage);
    if (!this.#stages) throw new InvalidArgumentError(`cluster ${this.keys.clusterName} has no recorded stages yet (no worker joined): deadLetters cannot tell the partitions of ${stage}`);
    if (!s) throw new InvalidArgumentError(`cluster ${this.keys.clusterName} has no stage ${JSON.stringify(stage)} (its stages: ${this.#stages.map((x) => x.name).join(', ')})`);
    const lists = await Promise.all(Array.from({ length: s.partitions }, (_, p) => this.options.broker.deadLetters(topic(s.namespace, partitionId(p)), s.subscription ?? s.name)));
    return lists.flat();
  }

  /** A unit's state and reason from the cluster's status, for a timed-out ask (undefined when unknown, or the status cannot be read). */
  async #unitState(stage: string, partition: number): Promise<string | undefined> {
    try {
      const unit = (await this.status()).partitions.find((u) => u.stage === stage && u.partition === partition);
      if (!unit) return undefined;
      // Running: its owner took the request (or will) but did not answer in time (found by a
      // new user: a 40 s query was reported as "no worker ran it").
      if (unit.state === 'running') return `running on ${unit.owner}, which did not answer in time: the query is slow, or its partition is held by a long batch or by more than 64 queries at once (queries run beside its batches, each on a snapshot)${unit.reason ? `; ${unit.reason}` : ''}`;
      return `${unit.state}${unit.owner ? ` on ${unit.owner}` : unit.assignedTo ? ` (assigned to ${unit.assignedTo})` : ''}${unit.reason ? `: ${unit.reason}` : ''}`;
    } catch {
      return undefined;
    }
  }

  status(): Promise<ClusterStatus> {
    return readClusterStatus(this.redis, this.keys, this.options.broker);
  }

  async claim(name: string, value: string): Promise<string> {
    if (!/^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$/.test(name)) throw new InvalidArgumentError(`a claim's name is 1 to 128 letters, digits, '.', '_', '-', '/', got ${JSON.stringify(name)}`);
    const previous = await askCoordination(`claim ${name} for cluster ${this.keys.clusterName}`, () => this.redis.set(this.keys.claim(name), value, 'NX', 'GET'));
    return previous ?? value;
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const [id, w] of this.#waiting) {
        clearTimeout(w.timer);
        w.reject(new BrokerClosedError(`the cluster client was closed before ${w.stage}/${w.partition} answered`));
        this.#waiting.delete(id);
      }
      this.#feed?.unsubscribe();
      await this.#consumer.close();
      await Promise.all([...this.#producers.values()].map((p) => p.then((x) => x.close(), () => {})));
      this.redis.disconnect();
    })();
    return this.#closing;
  }

  /** The cluster's stages: the cached ones, read again from Redis when asked to or when none were recorded yet. */
  async #readStages(again: boolean): Promise<ClusterStage[] | undefined> {
    if (again || !this.#stages) this.#stages = (await readClusterTopology(this.redis, this.keys)) ?? this.#stages;
    return this.#stages;
  }

  /**
   * Refuses a unit the cluster does not have, once its stages are recorded (before that, the
   * request waits in the broker for a worker that runs it).
   * @throws InvalidArgumentError for an unknown stage; RangeError for a partition out of range
   */
  async #checkUnit(stage: string, partition: number): Promise<void> {
    if (!Number.isInteger(partition) || partition < 0) throw new RangeError(`partition ${partition} is not an integer >= 0`);
    let stages = await this.#readStages(false);
    if (stages && !stages.some((s) => s.name === stage)) stages = await this.#readStages(true);
    if (!stages) return;
    const s = stages.find((x) => x.name === stage);
    if (!s) throw new InvalidArgumentError(`cluster ${this.keys.clusterName} has no stage ${JSON.stringify(stage)} (its stages: ${stages.map((x) => x.name).join(', ')})`);
    if (partition >= s.partitions) throw new RangeError(`partition ${partition} outside [0, ${s.partitions}) of stage ${stage}`);
  }

  /** The producer on the request topic of `stage`/`partition`, opened at its first request. */
  #producer(stage: string, partition: number): Promise<Producer> {
    const unit = `${stage}/${partition}`;
    let p = this.#producers.get(unit);
    if (!p) {
      p = this.options.broker.producer(askTopic(stage, partition), { producer: producerId(`sf-client@${this.replySlot.toString(16)}`) });
      this.#producers.set(unit, p);
      p.catch(() => this.#producers.get(unit) === p && this.#producers.delete(unit));
    }
    return p;
  }

  /** Settles the ask a reply answers; a duplicate or late reply (its ask already settled) is dropped, one that does not decode is dead-lettered. */
  async #onReply(m: BrokerMessage, consumer: Consumer): Promise<void> {
    let reply: AskReply;
    try {
      reply = askReplyCodec.decode(m.payload);
    } catch (err) {
      this.#logger.warn({ cluster: this.keys.clusterName, err }, 'a reply does not decode: dead-lettered');
      await consumer.deadLetter(m, (err as Error).message).catch(() => {});
      return;
    }
    const w = this.#waiting.get(reply.id);
    if (w) {
      this.#waiting.delete(reply.id);
      clearTimeout(w.timer);
      if (reply.ok) w.resolve(reply.answer);
      else w.reject(new RemoteAskError(reply.error.message, reply.error.name, reply.error.code, w.stage, w.partition, reply.worker));
    } else {
      this.#logger.debug({ cluster: this.keys.clusterName, id: reply.id, worker: reply.worker }, 'reply to an ask already settled (a request that ran twice, or came after its timeout): dropped');
    }
    await consumer.ack(m).catch(() => {});
  }
}
