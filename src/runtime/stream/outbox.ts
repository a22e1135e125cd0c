import { PayloadTooLargeError } from '../../errors.js';
import type { Broker, Producer } from '../brokers/broker.js';
import { partitionId, sequence, type ProducerId } from '../ids.js';
import { epochSequence } from './producerEpoch.js';
import { topicName, type Topic } from '../topics.js';
import { decodeInt64, encodeInt64 } from '../../operators/mergeOperators.js';
import type { Store, WriteBatch } from '../../storage/index.js';
import type { FlowCounters } from './flowCounters.js';
import type { PartitionFence } from './ownerEpoch.js';
import { StreamColumnFamilies, outboxKey, parseOutboxKey, type StreamColumnFamilyNames } from './reserved.js';

/** What `StreamOutbox.open` needs. */
export interface StreamOutboxOptions {
  readonly store: Store;
  readonly broker: Broker;
  /** Names this outbox's rows and sequences; one stage partition owns an outbox (e.g. the stage name). */
  readonly owner: string;
  /** Producer name on the broker, stable across restarts (e.g. `count@3`). */
  readonly producer: ProducerId;
  /**
   * The owner's epoch when a cluster assigns the partition (ownerEpoch.ts): the first
   * sequence this outbox gives on a topic is at least `epoch * 2^32` (producerEpoch.ts), so
   * receivers rank every message of this ownership above those of older owners. Rows an
   * older owner left keep their sequences. Default 0 (sequences as stored).
   */
  readonly epoch?: number;
  /**
   * The ownership the outbox publishes under: checked before each send (`publish`, and the
   * replay of `open`), so that a fenced-off owner publishes nothing more (it throws the
   * fence's FencedError; the rows stay for the next owner to publish). Default: none.
   */
  readonly fence?: PartitionFence;
  readonly counters: FlowCounters;
  /**
   * The column families of the outbox rows and of the sequences (default
   * `StreamColumnFamilies`: `sf.outbox`, `sf.meta`); both must exist in `store`.
   */
  readonly columnFamilies?: StreamColumnFamilyNames;
  /**
   * Whether `open` publishes the rows a previous incarnation left (default true). False when
   * publishing waits for a checkpoint (stageCheckpoints.ts): the rows stay pending for the
   * next `publish()`.
   */
  readonly publishOnOpen?: boolean;
  /**
   * Publishing waits for checkpoints taken while other writers commit to the same store (a
   * web-index partition's actors, partitionCheckpointer.ts): `publish()` then sends nothing
   * and only marks the rows it would have sent as committed; `committedRows` and
   * `publishCommitted(n)` let the checkpointer publish exactly the rows a durable checkpoint
   * holds. Rows left by an earlier incarnation are committed at `open` (implies
   * `publishOnOpen: false`). Default false.
   */
  readonly heldForCheckpoint?: boolean;
}

interface Pending {
  readonly topic: Topic;
  readonly seq: number;
  readonly payload: Uint8Array;
}

/**
 * The transactional outbox (of a stream stage, or of any actor that owns a store): messages
 * sent as the effect of a batch are written to the outbox family (`sf.outbox` unless
 * `columnFamilies` names another; key `<owner>|<topic> 0x00 seq (BE)`, see reserved.ts) in
 * the same RocksDB write batch as the batch's other effects, with their sequence numbers,
 * and published after the commit. A crash between commit and publish is repaired by `open`,
 * which publishes what is left; a crash between publish and the delete of the rows
 * publishes them twice with the same `(producer, sequence)`, which the receivers' applied
 * marks skip. Sequences per topic are kept in the meta family (`sf.meta`;
 * `seq 0x00 <owner> 0x00 <topic>`, int64 LE) in the same batch, so they never go back
 * (epoch 0 in the terms of producerEpoch.ts). The producer name is kept beside them
 * (`producer 0x00 <owner>`, UTF-8; written by `open`), so that a reader of the meta family
 * alone (`readStreamFlow`) knows under which producer each sequence was sent.
 */
export class StreamOutbox {
  readonly #producers = new Map<string, Producer>();
  readonly #next = new Map<string, number>();
  #pending: Pending[] = [];
  /** With `heldForCheckpoint`: committed rows, in commit order, waiting for a checkpoint that holds them. */
  #committed: Pending[] = [];
  #closed = false;

  readonly #families: StreamColumnFamilyNames;

  private constructor(readonly options: StreamOutboxOptions) {
    this.#families = options.columnFamilies ?? StreamColumnFamilies;
  }

  /**
   * Opens the outbox, records its producer name in the meta family when it is not recorded
   * yet, and publishes rows a previous incarnation left (unless `publishOnOpen` is false).
   * @throws the store's and broker's errors; the fence's FencedError
   */
  static async open(options: StreamOutboxOptions): Promise<StreamOutbox> {
    const outbox = new StreamOutbox(options);
    const producerKey = outboxProducerKey(options.owner);
    const recorded = await options.store.get(outbox.#families.meta, producerKey);
    if (recorded?.toString('utf8') !== options.producer) await options.store.put(outbox.#families.meta, producerKey, Buffer.from(options.producer, 'utf8'));
    const prefix = `${options.owner}|`;
    for await (const [key, value] of options.store.iterate(outbox.#families.outbox, { prefix })) {
      const { topic, seq } = parseOutboxKey(key);
      const row = { topic: parseTopic(topic.slice(prefix.length)), seq, payload: value };
      if (options.heldForCheckpoint) outbox.#committed.push(row);
      else outbox.#pending.push(row);
    }
    if ((options.publishOnOpen ?? true) && !options.heldForCheckpoint) await outbox.publish();
    return outbox;
  }

  #metaKey(name: string): string {
    return `seq\u0000${this.options.owner}\u0000${name}`;
  }

  /**
   * Adds a message for `topic` to `batch`. Call `publish()` after the batch commits; if the
   * commit fails, drop this outbox (its sequence cache ran ahead) and open a new one.
   * @returns the sequence number given to the message
   */
  async enqueue(batch: WriteBatch, topic: Topic, payload: Uint8Array): Promise<number> {
    const name = topicName(topic);
    let seq = this.#next.get(name);
    if (seq === undefined) {
      const stored = await this.options.store.get(this.#families.meta, this.#metaKey(name));
      seq = stored ? Number(decodeInt64(stored)) : 0;
    }
    if (this.options.epoch) seq = Math.max(seq, epochSequence(this.options.epoch, 0));
    this.#next.set(name, seq + 1);
    batch.put(this.#families.outbox, outboxKey(`${this.options.owner}|${name}`, seq), payload);
    batch.put(this.#families.meta, this.#metaKey(name), encodeInt64(seq + 1));
    this.#pending.push({ topic, seq, payload });
    return seq;
  }

  /**
   * Publishes every committed message, in sequence order per topic, then deletes their rows.
   * With `heldForCheckpoint`, sends nothing: the enqueued rows (whose batch committed before
   * this call) join `committedRows`, for `publishCommitted` after a checkpoint holds them.
   */
  async publish(): Promise<void> {
    if (this.#pending.length === 0) return;
    if (this.options.heldForCheckpoint) {
      for (const m of this.#pending) this.#committed.push(m);
      this.#pending = [];
      return;
    }
    const pending = this.#pending;
    this.#pending = [];
    const { store } = this.options;
    const done = store.batch();
    for (const m of pending) await this.#send(m, done);
    await store.write(done);
  }

  /**
   * Sends one row under its sequence (the fence checked right before) and adds the delete of
   * its row to `done`.
   * @throws the broker's errors; the fence's FencedError
   */
  async #send(m: Pending, done: WriteBatch): Promise<void> {
    const name = topicName(m.topic);
    const producer = await this.#producer(m.topic);
    this.options.fence?.check();
    try {
      await this.options.counters.sending(m.topic.namespace, { producer: this.options.producer, topic: name, sequence: m.seq }, () => producer.send(m.payload, { sequence: sequence(m.seq) }));
    } catch (err) {
      // A committed row no send takes (written before emits were checked against the limit,
      // or under a broker that allowed more): no retry helps, so say what would.
      if (err instanceof PayloadTooLargeError) {
        throw new PayloadTooLargeError(
          `outbox row ${m.seq} of ${this.options.owner} for ${name} (${err.bytes} bytes, committed) is over this broker's maxPayloadBytes (${err.limit}): it stays in the outbox, and the rows after it on that topic wait for it; start on a broker whose maxPayloadBytes is at least ${err.bytes} to publish it`,
          err.bytes,
          err.limit,
          { cause: err },
        );
      }
      throw err;
    }
    done.delete(this.#families.outbox, outboxKey(`${this.options.owner}|${name}`, m.seq));
  }

  /** Messages enqueued and not yet published. */
  get size(): number {
    return this.#pending.length;
  }

  /** With `heldForCheckpoint`: rows committed (in the store) and not yet published, oldest first. */
  get committedRows(): number {
    return this.#committed.length;
  }

  /** True once `close()` was called (its producers are gone; a new incarnation's outbox publishes the rows). */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * With `heldForCheckpoint`: publishes the `count` oldest committed rows (those a durable
   * checkpoint holds): the rows of one topic one at a time in commit order (a receiver's
   * applied mark skips any sequence at or below it, so a topic's sequences must arrive in
   * order), different topics concurrently; each row is dropped from `committedRows` once the
   * broker took it, then the published rows are deleted in one write. A topic whose send fails
   * sends none of its later rows; those rows, in order, are left for the next call (other
   * topics go on). Rows sent and not yet deleted are sent again then with their sequences,
   * which the receivers' applied marks skip. (One row at a time over every topic took about
   * 40 ms a row on Redis Streams under load average 16: 7 to 10 s for the 170 to 280 rows of
   * one web-index checkpoint, docs/cluster.md, "Queries during a move".)
   * @param beforeDelete called synchronously right before the write that deletes the published rows
   * @param onSent called once every row was sent, before that write (not when a send failed):
   *   the rows are published then; the write only spares sending them again
   * @throws the first failure of a topic's send (the broker's errors; the fence's FencedError); the store's errors
   */
  async publishCommitted(count: number, beforeDelete?: () => void, onSent?: () => void): Promise<void> {
    const { store } = this.options;
    const done = store.batch();
    const byTopic = new Map<string, Pending[]>();
    for (const m of this.#committed.slice(0, count)) {
      const name = topicName(m.topic);
      const rows = byTopic.get(name);
      if (rows) rows.push(m);
      else byTopic.set(name, [m]);
    }
    const sent = new Set<Pending>();
    try {
      const outcomes = await Promise.allSettled([...byTopic.values()].map(async (rows) => {
        for (const m of rows) {
          await this.#send(m, done);
          sent.add(m);
        }
      }));
      const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
      if (failed) throw failed.reason;
      onSent?.();
    } finally {
      if (sent.size > 0) {
        this.#committed = this.#committed.filter((m) => !sent.has(m));
        beforeDelete?.();
        await store.write(done);
      }
    }
  }

  /** Closes this outbox's broker producers. */
  async close(): Promise<void> {
    this.#closed = true;
    const producers = [...this.#producers.values()];
    this.#producers.clear();
    await Promise.all(producers.map((p) => p.close()));
  }

  async #producer(topic: Topic): Promise<Producer> {
    const name = topicName(topic);
    let p = this.#producers.get(name);
    if (!p) {
      p = await this.options.broker.producer(topic, { producer: this.options.producer });
      this.#producers.set(name, p);
    }
    return p;
  }
}

/** Meta-family key of the producer name of outbox `owner` (value: the name, UTF-8). */
export function outboxProducerKey(owner: string): string {
  return `producer\u0000${owner}`;
}

function parseTopic(name: string): Topic {
  const slash = name.lastIndexOf('/');
  return { namespace: name.slice(0, slash), partition: partitionId(Number(name.slice(slash + 1))) };
}
