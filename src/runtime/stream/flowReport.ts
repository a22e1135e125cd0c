import { InvalidArgumentError, JobStalledError } from '../../errors.js';
import { decodeInt64 } from '../../operators/mergeOperators.js';
import type { Store } from '../../storage/index.js';
import { systemClock, type Clock } from '../clock.js';
import { sequenceEpoch } from './producerEpoch.js';
import { StreamColumnFamilies, type StreamColumnFamilyNames } from './reserved.js';

/**
 * Quiet detection across processes from the stores alone: every store that sends through a
 * `StreamOutbox` and applies through `StreamMarks` keeps, in its meta family, what it
 * committed to send (the outbox's next sequence per destination topic) and what it applied
 * (the applied mark per producer). A stream (producer, topic) is applied once the mark of the
 * consumer that receives the topic has reached the last sequence sent. Nothing here needs a
 * process-local counter, so the partitions may run in any number of processes.
 */

/** One outbox of a store: what it committed to send. */
export interface OutboxFlow {
  /** The outbox's owner (e.g. `indexer`, a stage name). */
  readonly owner: string;
  /**
   * Its broker producer name, as `StreamOutbox.open` records it; undefined for an outbox not
   * opened since producer names were recorded (its streams cannot be matched: never quiet).
   */
  readonly producer: string | undefined;
  /** Per destination topic name (`<namespace>/<p>`): the next sequence, so the last sent is `next - 1` (epoch-packed). */
  readonly next: Readonly<Record<string, number>>;
}

/** One consumer of a store: what it applied. */
export interface ConsumerFlow {
  /** The consumer's marks name (e.g. `backlinks`, a stage name). */
  readonly consumer: string;
  /** Per producer name: the highest applied sequence (epoch-packed). */
  readonly applied: Readonly<Record<string, number>>;
  /**
   * Per producer name: the last undecodable message dead-lettered above the mark without
   * moving it (`StreamMarks.deadLetteredAbove`); absent when none was.
   */
  readonly deadLettered?: Readonly<Record<string, number>>;
}

/** What one store committed to send and applied, read from one snapshot of its meta family (plain data). */
export interface StreamFlowReport {
  readonly outboxes: readonly OutboxFlow[];
  readonly consumers: readonly ConsumerFlow[];
}

/**
 * Reads the stream bookkeeping of `store` from one snapshot of its meta family: the keys
 * `seq 0x00 <owner> 0x00 <topic>` and `producer 0x00 <owner>` of its outboxes and
 * `applied 0x00 <consumer> 0x00 <producer>` and `dead-above 0x00 <consumer> 0x00 <producer>`
 * of its consumers (reserved.ts).
 * @param families where the bookkeeping lives (default `sf.meta`; only `meta` is read)
 * @throws the store's errors (StoreClosedError once it closed)
 */
export async function readStreamFlow(store: Store, families: Pick<StreamColumnFamilyNames, 'meta'> = StreamColumnFamilies): Promise<StreamFlowReport> {
  const snapshot = store.snapshot();
  try {
    const outboxes = new Map<string, { producer: string | undefined; next: Record<string, number> }>();
    const outbox = (owner: string) => {
      let o = outboxes.get(owner);
      if (!o) outboxes.set(owner, (o = { producer: undefined, next: {} }));
      return o;
    };
    const consumers = new Map<string, Record<string, number>>();
    const deadAbove = new Map<string, Record<string, number>>();
    for (const prefix of ['applied\u0000', 'dead-above\u0000', 'producer\u0000', 'seq\u0000']) {
      for await (const [key, value] of store.iterate(families.meta, { prefix, snapshot })) {
        const [kind, name, rest] = splitKey(key.toString('utf8'));
        if (kind === 'producer') outbox(name).producer = value.toString('utf8');
        else if (rest === undefined) continue; // not a key of ours
        else if (kind === 'seq') outbox(name).next[rest] = Number(decodeInt64(value));
        else if (kind === 'dead-above') {
          let dead = deadAbove.get(name);
          if (!dead) deadAbove.set(name, (dead = {}));
          dead[rest] = Number(decodeInt64(value));
          if (!consumers.has(name)) consumers.set(name, {});
        } else {
          let marks = consumers.get(name);
          if (!marks) consumers.set(name, (marks = {}));
          marks[rest] = Number(decodeInt64(value));
        }
      }
    }
    return {
      outboxes: [...outboxes].map(([owner, o]) => ({ owner, producer: o.producer, next: o.next })),
      consumers: [...consumers].map(([consumer, applied]) => {
        const dead = deadAbove.get(consumer);
        return dead ? { consumer, applied, deadLettered: dead } : { consumer, applied };
      }),
    };
  } finally {
    snapshot.release();
  }
}

function splitKey(key: string): [string, string, string | undefined] {
  const a = key.indexOf('\u0000');
  const b = key.indexOf('\u0000', a + 1);
  return b < 0 ? [key.slice(0, a), key.slice(a + 1), undefined] : [key.slice(0, a), key.slice(a + 1, b), key.slice(b + 1)];
}

/** A stream sent by a producer that keeps no store here (a loader, an external producer). */
export interface SentStream {
  readonly producer: string;
  /** Topic name, `<namespace>/<p>`. */
  readonly topic: string;
  /** The next sequence: the last one sent is `next - 1`. */
  readonly next: number;
}

/** Who receives a topic: the index of the receiving store's report and the consumer's marks name there. */
export interface StreamReceiver {
  readonly report: number;
  readonly consumer: string;
}

/** Options of {@link unappliedStreams}. */
export interface UnappliedOptions {
  /**
   * The store (index into the reports) and consumer that receive `topic` (e.g. the web
   * index's `links/3`: report 3, consumer `backlinks`); undefined for a topic nobody consumes
   * (its streams are left out).
   */
  readonly receiver: (topic: string) => StreamReceiver | undefined;
  /** Streams of producers without a report (a loader): what each sent. */
  readonly external?: Iterable<SentStream>;
}

/** A stream whose receiver has not applied everything its producer committed to send. */
export interface UnappliedStream {
  /** The producer name; undefined for an outbox that never recorded it (see OutboxFlow.producer). */
  readonly producer: string | undefined;
  readonly topic: string;
  /** Last sequence sent. */
  readonly sent: number;
  /** The receiver's mark for the producer (-1: none); for an unknown producer, -1. */
  readonly applied: number;
  readonly receiver: StreamReceiver;
}

/**
 * The streams (producer, topic) not applied yet, given the reports of every store that
 * sends or receives (a pure function): each outbox's and each external stream's last
 * sequence sent against the receiving consumer's mark for that producer. A stream whose
 * receiving report is missing from `reports` counts as unapplied.
 * @throws InvalidArgumentError for a receiver index outside `reports`
 */
export function unappliedStreams(reports: readonly (StreamFlowReport | undefined)[], options: UnappliedOptions): UnappliedStream[] {
  const out: UnappliedStream[] = [];
  const check = (producer: string | undefined, topic: string, next: number) => {
    const receiver = options.receiver(topic);
    if (!receiver) return;
    if (!Number.isInteger(receiver.report) || receiver.report < 0 || receiver.report >= reports.length) {
      throw new InvalidArgumentError(`receiver of topic ${topic}: report ${receiver.report} outside the ${reports.length} reports`);
    }
    const flow = reports[receiver.report]?.consumers.find((c) => c.consumer === receiver.consumer);
    const applied = producer === undefined ? -1 : (flow?.applied[producer] ?? -1);
    // The last message sent was undecodable and dead-lettered without moving the mark: settled
    // (the messages before it on the topic came before it).
    const deadLast = producer !== undefined && flow?.deadLettered?.[producer] === next - 1;
    if (producer === undefined || (applied < next - 1 && !deadLast)) out.push({ producer, topic, sent: next - 1, applied, receiver });
  };
  for (const report of reports) {
    for (const o of report?.outboxes ?? []) for (const [topic, next] of Object.entries(o.next)) check(o.producer, topic, next);
  }
  for (const s of options.external ?? []) if (s.next > 0) check(s.producer, s.topic, s.next);
  return out;
}

/** Whether two collections of reports are identical (same stores in the same order, same counts). */
export function sameStreamFlow(a: readonly (StreamFlowReport | undefined)[], b: readonly (StreamFlowReport | undefined)[]): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** A sequence for a message: as is, with its epoch and number when it has an epoch (`epoch * 2^32 + n`, producerEpoch.ts). */
function readableSequence(seq: number): string {
  const epoch = seq >= 0 ? sequenceEpoch(seq) : 0;
  return epoch > 0 ? `${seq} (epoch ${epoch} #${seq - epoch * 2 ** 32})` : String(seq);
}

/** Options of {@link waitStreamsQuiet}. */
export interface WaitQuietOptions extends UnappliedOptions {
  /** Ms between collections. Default 50. */
  readonly pollMs?: number;
  /** Give up after this many ms (JobStalledError naming the streams still unapplied). Default 600,000. */
  readonly timeoutMs?: number;
  readonly clock?: Clock;
  readonly signal?: AbortSignal;
}

/**
 * A collection of reports with the work they do not show: what a `collect` of
 * {@link waitStreamsQuiet} may return instead of the reports alone.
 */
export interface FlowCollection {
  readonly reports: readonly (StreamFlowReport | undefined)[];
  /**
   * Parts that hold work outside the streams, by name with why (e.g. `crawl-policy of
   * partition 3: 2 requests out`; a stream whose producer keeps no store, behind): the cut is
   * quiet only when this is empty in both collections. Each part must be asked after its
   * store's report was read in the same collection, so that work it takes on after that read
   * commits something its next report shows.
   */
  readonly busy: readonly string[];
}

/** What {@link waitStreamsQuiet} saw. */
export interface QuietReport {
  /** Collections made. */
  readonly collections: number;
  /** The last collection (identical to the one before). */
  readonly reports: readonly (StreamFlowReport | undefined)[];
}

/**
 * Waits until the streams are quiet: nothing unapplied in two consecutive collections with
 * identical reports (Mattern's four-counter method, "Algorithms for distributed termination
 * detection", Distributed Computing 2(3), 1987). One collection is not enough: the stores are
 * read one after the other, not at one instant, so a message sent by a store read late to a
 * store read early is in no report, and a collection may look balanced while it is in flight.
 * When a second collection, started after the first ended, finds every report unchanged, no
 * store committed anything between its two reads; those intervals all contain the instant
 * between the two collections, so the reports are the state of every store at that one
 * instant (a consistent cut), and nothing was unapplied then. Since applying and sending are
 * committed together (marks and outbox sequences in one write batch), nothing can follow
 * from a quiet cut but work started from outside (a new external stream, a timer of an
 * application). Folded but uncommitted work shows as unapplied (its marks are not written).
 *
 * Work the stores' meta families do not show (an actor that holds requests out to producers
 * without a store) comes in a {@link FlowCollection}'s `busy`: quiet also needs it empty in
 * both collections.
 * @param collect the reports of every store, in the order the receivers index them, or a
 *   {@link FlowCollection} of them
 * @throws JobStalledError after `timeoutMs`; the signal's reason; what `collect` throws
 */
export async function waitStreamsQuiet(collect: () => Promise<readonly (StreamFlowReport | undefined)[] | FlowCollection>, options: WaitQuietOptions): Promise<QuietReport> {
  const clock = options.clock ?? systemClock;
  const pollMs = options.pollMs ?? 50;
  const deadline = clock.now() + (options.timeoutMs ?? 600_000);
  let previous: readonly (StreamFlowReport | undefined)[] | undefined;
  for (let collections = 1; ; collections++) {
    options.signal?.throwIfAborted();
    const collected = await collect();
    const { reports, busy } = 'reports' in collected ? collected : { reports: collected, busy: [] as readonly string[] };
    const unapplied = unappliedStreams(reports, options);
    const settled = unapplied.length === 0 && busy.length === 0;
    if (settled && previous && sameStreamFlow(previous, reports)) return { collections, reports };
    previous = settled ? reports : undefined;
    if (clock.now() >= deadline) {
      const shown = unapplied.slice(0, 5).map((u) => `${u.producer ?? '(unknown producer)'} -> ${u.topic}: sent ${readableSequence(u.sent)}, applied ${readableSequence(u.applied)}`);
      const held = busy.length ? `; busy: ${busy.slice(0, 5).join('; ')}${busy.length > 5 ? ` and ${busy.length - 5} more` : ''}` : '';
      throw new JobStalledError(`streams not quiet after ${options.timeoutMs ?? 600_000} ms: ${unapplied.length} unapplied${shown.length ? ` (${shown.join('; ')})` : unapplied.length || busy.length ? '' : ', reports still changing'}${held}`);
    }
    await new Promise<void>((resolve) => clock.setTimeout(resolve, pollMs));
  }
}
