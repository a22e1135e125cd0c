import { Subject } from 'rxjs';
import { ActorSystem, type Behavior } from '../src/runtime/actor/index.js';
import { benchOptions } from './lib/options.js';
import { handWiredRate, stageRate } from './lib/stageVsHandWired.js';

/** Producer messages: start a run of `count` tells to the consumer. */
interface Go {
  readonly count: number;
  readonly awaitEach: boolean;
}

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'params', 'subjectMsgsPerSec', 'actorAwaitedTellMsgsPerSec', 'actorFireAndForgetMsgsPerSec', 'awaitFloorMsgsPerSec', 'ratio', 'ratioAwaitEach', 'stageMsgsPerSec', 'handWiredMsgsPerSec', 'stageOverHandWired', 'rssMiB'] as const;

/**
 * Throughput of `tell` between two actors against an RxJS `Subject` in the same process and run.
 *
 * - subject: `subject.next(i)` N times to one subscriber that counts (synchronous delivery);
 * - actors: a producer actor's `receive()` tells N numbers to a consumer actor that counts; timed
 *   until the consumer has counted N. Two variants: `await` on every `tell` (the backpressure-aware
 *   form, bounded mailbox) and fire-and-forget into an unbounded mailbox.
 *
 * - awaitFloor: a bare loop of N `await`s on a resolved promise, the ceiling of any
 *   await-per-message sender (one microtask each), to show where the awaited variant's time goes.
 *
 * Args: `--messages N` (default 2,000,000), `--capacity C` consumer mailbox bound for the awaited
 * variant (default 1024), `--rounds R` (default 3; the best round counts, after one warm-up round);
 * `--smoke`: 20,000 messages, 1 round (bench/lib/options.ts).
 * - stage: messages/s through ONE exactly-once stream stage (memory broker, one partition, a commit
 *   per batch) against the same work wired by hand (raw broker consumer, batchMessages, one RocksDB
 *   write batch per batch with an int64 add merge per message plus the applied mark, commit, ack);
 *   bench/lib/stageVsHandWired.ts. `--stage-messages N` (default 200,000; smoke 5,000).
 *   `stageOverHandWired` = stage rate / hand-wired rate (target >= 0.9). The sides alternate
 *   round by round (best of `--rounds` each, after a warm-up of each), and each checks that its
 *   stored counts sum to the messages sent.
 *
 * Returns messages/s for each; `ratio` = fire-and-forget actor rate / subject rate (the tell path
 * itself; target >= 0.5), `ratioAwaitEach` = awaited actor rate / subject rate.
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const o = benchOptions(args);
  const messages = o.number('--messages', 2_000_000, 20_000);
  const capacity = o.number('--capacity', 1024);
  const rounds = o.number('--rounds', 3, 1);
  const stageMessages = o.number('--stage-messages', 200_000, 5_000);

  const best = async (measure: () => Promise<number>): Promise<number> => {
    await measure(); // warm-up
    let top = 0;
    for (let r = 0; r < rounds; r++) top = Math.max(top, await measure());
    return top;
  };

  const subjectRate = await best(async () => {
    const subject = new Subject<number>();
    let count = 0;
    subject.subscribe(() => {
      count++;
    });
    const t0 = performance.now();
    for (let i = 0; i < messages; i++) subject.next(i);
    const seconds = (performance.now() - t0) / 1000;
    if (count !== messages) throw new Error('subject lost messages');
    return messages / seconds;
  });

  const awaitFloor = await best(async () => {
    const resolved = Promise.resolve();
    const t0 = performance.now();
    for (let i = 0; i < messages; i++) await resolved;
    return messages / ((performance.now() - t0) / 1000);
  });

  const system = ActorSystem.create({ name: 'bench-runtime' });
  const actorRate = async (awaitEach: boolean, mailboxCapacity: number): Promise<number> => {
    let count = 0;
    let target = 0;
    let done: () => void = () => {};
    const consumer: Behavior<number, void, void> = {
      kind: 'consumer',
      start: () => undefined,
      receive: () => {
        if (++count === target) done();
      },
    };
    const name = `c${awaitEach ? 'a' : 'f'}${mailboxCapacity}`;
    const consumerRef =
      system.lookup<number, void>(`/${name}`) ??
      system.spawn(name, consumer, mailboxCapacity === Infinity ? {} : { mailbox: { capacity: mailboxCapacity } });
    const producer: Behavior<Go, void, void> = {
      kind: 'producer',
      start: () => undefined,
      receive: async (_state, go) => {
        if (go.awaitEach) {
          for (let i = 0; i < go.count; i++) await consumerRef.tell(i);
        } else {
          for (let i = 0; i < go.count; i++) void consumerRef.tell(i);
        }
      },
    };
    const producerRef = system.lookup<Go, void>(`/p${name}`) ?? system.spawn(`p${name}`, producer);
    return best(async () => {
      count = 0;
      target = messages;
      const finished = new Promise<void>((resolve) => (done = resolve));
      const t0 = performance.now();
      await producerRef.tell({ count: messages, awaitEach });
      await finished;
      return messages / ((performance.now() - t0) / 1000);
    });
  };

  const awaited = await actorRate(true, capacity);
  const fireAndForget = await actorRate(false, Infinity);
  await system.terminate();
  // The two sides of the stage figure take turns round by round (after one warm-up each), so
  // that a change of load on a shared machine falls on both and not on one side's rounds.
  await stageRate(stageMessages);
  await handWiredRate(stageMessages);
  let stage = 0;
  let handWired = 0;
  for (let r = 0; r < rounds; r++) {
    stage = Math.max(stage, await stageRate(stageMessages));
    handWired = Math.max(handWired, await handWiredRate(stageMessages));
  }
  return {
    smoke: o.smoke,
    params: { messages, capacity, rounds, stageMessages },
    subjectMsgsPerSec: Math.round(subjectRate),
    actorAwaitedTellMsgsPerSec: Math.round(awaited),
    actorFireAndForgetMsgsPerSec: Math.round(fireAndForget),
    awaitFloorMsgsPerSec: Math.round(awaitFloor),
    ratio: Number((fireAndForget / subjectRate).toFixed(3)),
    ratioAwaitEach: Number((awaited / subjectRate).toFixed(3)),
    stageMsgsPerSec: Math.round(stage),
    handWiredMsgsPerSec: Math.round(handWired),
    stageOverHandWired: Number((stage / handWired).toFixed(3)),
    rssMiB: Math.round(process.memoryUsage().rss / 2 ** 20),
  };
}
