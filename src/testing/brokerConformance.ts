import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { InvalidArgumentError, isShardflowError } from '../errors.js';
import type { Broker, BrokerMessage, Consumer, DeadLetter, SubscribeOptions } from '../runtime/brokers/broker.js';
import { DEFAULT_MAX_PAYLOAD_BYTES, type RawFields } from '../runtime/brokers/internal/malformed.js';
import { batching } from '../runtime/brokers/interceptors/batching.js';
import { composeConsumer, composeProducer } from '../runtime/brokers/interceptors/compose.js';
import { compression, type CompressionCodec } from '../runtime/brokers/interceptors/compression.js';
import { partitionId, producerId, sequence } from '../runtime/ids.js';
import { topic, type Topic } from '../runtime/topics.js';

/**
 * The broker conformance suite: the semantics of `Broker` (src/runtime/brokers/broker.ts)
 * checked the same way against every implementation. Each broker's test file calls
 * `brokerConformance` with a factory.
 *
 * Timing: nothing sleeps a fixed time to let something happen; waits poll with deadlines
 * generous enough for a loaded 2-core machine. Only the "nothing more arrives" checks wait a
 * fixed quiet period (`factory.quietMs`).
 */
export interface BrokerFactory {
  /** Suite title, e.g. `redis`. */
  readonly name: string;
  /**
   * Why the suite cannot run (server not reachable), or undefined to run it. Resolved once
   * before the suite; with `SHARDFLOW_REQUIRE_BROKERS=1` a reason fails the run instead.
   */
  unavailable(): Promise<string | undefined>;
  /** A new client of the same server. The suite closes every client it makes. */
  create(): Promise<Broker>;
  /** Stops and starts the server process (Redis, Pulsar); absent for in-process brokers. */
  readonly restart?: () => Promise<void>;
  /** Fixed wait for "no further delivery" assertions, ms. Default 700. */
  readonly quietMs?: number;
  /** Deadline for one expected delivery, ms. Default 20000. */
  readonly deadlineMs?: number;
  /** Removes what the suite left on the server (after all tests). */
  readonly cleanup?: () => Promise<void>;
  /** `maxPayloadBytes` the brokers of `create` were configured with. Default 5 MiB. */
  readonly maxPayloadBytes?: number;
  /**
   * Writes one entry on `t` the way a foreign producer would, past our producer: only the
   * given fields (payload bytes, producer and sequence as text; an absent field is not
   * written, and with none the entry has no field of ours). Redis: a raw XADD; Pulsar: a
   * WebSocket produce with those properties; memory: `MemoryBroker.appendRaw`.
   */
  readonly injectForeign: (t: Topic, entry: ForeignEntry) => Promise<void>;
  /**
   * Deletes the broker's data of `t` under live consumers (Redis: DEL of the stream; Pulsar:
   * forced topic delete). Absent for brokers that cannot lose data that way (memory).
   */
  readonly loseData?: (t: Topic) => Promise<void>;
}

/** An entry as a foreign producer writes it (see `BrokerFactory.injectForeign`). */
export type ForeignEntry = RawFields;

/**
 * Why a Pulsar admin API at `webUrl` cannot be used (the `unavailable` check of the Pulsar
 * suite), or undefined when it answers.
 */
export async function pulsarUnavailable(webUrl: string): Promise<string | undefined> {
  try {
    const res = await fetch(`${webUrl}/admin/v2/clusters`, { signal: AbortSignal.timeout(3000) });
    if (!res.ok) return `admin API answered ${res.status}`;
    return undefined;
  } catch (err) {
    return `${webUrl} not reachable: ${(err as Error).message} (start it with scripts/pulsar/start.sh)`;
  }
}

/** Payload `"<label>:<i>"`. */
export function text(label: string, i: number): Uint8Array {
  return new TextEncoder().encode(`${label}:${i}`);
}

/** Payload as a string. */
export function str(m: BrokerMessage): string {
  return new TextDecoder().decode(m.payload);
}

/**
 * Pulls until `n` messages arrived or `deadlineMs` passed.
 * @returns the messages, in arrival order (may be fewer than `n` at the deadline).
 */
export async function pull(c: Consumer, n: number, deadlineMs: number): Promise<BrokerMessage[]> {
  const out: BrokerMessage[] = [];
  const end = Date.now() + deadlineMs;
  while (out.length < n) {
    const left = end - Date.now();
    if (left <= 0) break;
    out.push(...(await c.receive(n - out.length, Math.min(left, 1000))));
  }
  return out;
}

/** Like `pull`, acking each message as it arrives (so `receiverQueueSize` never stalls it). */
export async function pullAck(c: Consumer, n: number, deadlineMs: number): Promise<BrokerMessage[]> {
  const out: BrokerMessage[] = [];
  const end = Date.now() + deadlineMs;
  while (out.length < n) {
    const left = end - Date.now();
    if (left <= 0) break;
    for (const m of await c.receive(n - out.length, Math.min(left, 1000))) {
      await c.ack(m);
      out.push(m);
    }
  }
  return out;
}

/** Polls `probe` until it returns a value that passes `ok`, or fails at the deadline. */
export async function eventually<T>(probe: () => Promise<T>, ok: (v: T) => boolean, deadlineMs: number, what: string): Promise<T> {
  const end = Date.now() + deadlineMs;
  let last: T;
  for (let wait = 20; ; wait = Math.min(wait * 2, 500)) {
    last = await probe();
    if (ok(last)) return last;
    if (Date.now() > end) assert.fail(`${what}: not reached within ${deadlineMs} ms (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, wait));
  }
}

/** Unique partition ids so that runs against a persistent server never share a topic. */
function topicMaker(): () => Topic {
  let n = 0;
  const base = (Date.now() % 100_000_000) * 100;
  return () => topic('links', partitionId(base + n++));
}

/** Defines the conformance tests (node:test) for one broker. */
export function brokerConformance(factory: BrokerFactory): void {
  const deadline = factory.deadlineMs ?? 20_000;
  const quiet = factory.quietMs ?? 700;
  const nextTopic = topicMaker();
  const clients: Broker[] = [];
  let skip: string | undefined;

  describe(`broker conformance: ${factory.name}`, () => {
    before(async () => {
      const reason = await factory.unavailable();
      if (reason && process.env.SHARDFLOW_REQUIRE_BROKERS === '1') {
        throw new Error(`${factory.name} is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${reason}`);
      }
      skip = reason;
    });
    after(async () => {
      await Promise.allSettled(clients.map((c) => c.close()));
      if (!skip) await factory.cleanup?.();
    });

    /** `it` that skips (with the reason) when the server is unavailable. */
    function test(name: string, body: (b: Broker) => Promise<void>): void {
      it(name, async (t) => {
        if (skip) {
          t.skip(`${factory.name} unavailable: ${skip}`);
          return;
        }
        const b = await factory.create();
        clients.push(b);
        await body(b);
      });
    }

    async function send(b: Broker, t: Topic, name: string, label: string, count: number, from = 0): Promise<void> {
      const p = await b.producer(t, { producer: producerId(name) });
      for (let i = from; i < from + count; i++) await p.send(text(label, i));
      await p.flush();
      await p.close();
    }

    const sub = (o: Partial<SubscribeOptions> & Pick<SubscribeOptions, 'type'>): SubscribeOptions => ({
      subscription: 'conf',
      nackRedeliveryDelayMs: 100,
      ...o,
    });

    test('keeps per-producer order on a topic and carries producer and sequence', async (b) => {
      const t = nextTopic();
      const c = await b.subscribe(t, sub({ type: 'exclusive' }));
      const pa = await b.producer(t, { producer: producerId('a') });
      const pb = await b.producer(t, { producer: producerId('b') });
      const sends: Promise<void>[] = [];
      for (let i = 0; i < 40; i++) {
        sends.push(pa.send(text('a', i)));
        sends.push(pb.send(text('b', i)));
      }
      await Promise.all(sends);
      const got = await pull(c, 80, deadline);
      for (const m of got) await c.ack(m);
      assert.equal(got.length, 80);
      for (const name of ['a', 'b']) {
        const mine = got.filter((m) => m.producer === name);
        assert.deepEqual(mine.map((m) => m.sequence), Array.from({ length: 40 }, (_, i) => i));
        assert.deepEqual(mine.map(str), Array.from({ length: 40 }, (_, i) => `${name}:${i}`));
        for (const m of mine) {
          assert.equal(m.redeliveryCount, 0);
          assert.ok(m.publishTime > Date.now() - 600_000 && m.publishTime <= Date.now() + 60_000, `publishTime ${m.publishTime}`);
        }
      }
      const replay = await b.producer(t, { producer: producerId('a') });
      await replay.send(text('a', 99), { sequence: sequence(99) });
      const [m] = await pull(c, 1, deadline);
      assert.equal(m?.sequence, 99);
      await c.ack(m!);
    });

    test('an acked message is not delivered again to the subscription', async (b) => {
      const t = nextTopic();
      const c1 = await b.subscribe(t, sub({ type: 'shared' }));
      await send(b, t, 'p', 'ack', 10);
      const got = await pull(c1, 10, deadline);
      assert.equal(got.length, 10);
      for (const m of got.slice(0, 6)) await c1.ack(m);
      await c1.close();
      const c2 = await b.subscribe(t, sub({ type: 'shared' }));
      const again = await pull(c2, 4, deadline);
      assert.deepEqual(again.map(str).sort(), ['ack:6', 'ack:7', 'ack:8', 'ack:9']);
      for (const m of again) await c2.ack(m);
      assert.deepEqual(await c2.receive(10, quiet), []);
    });

    test('nack redelivers after the delay with an incremented redeliveryCount', async (b) => {
      const t = nextTopic();
      const c = await b.subscribe(t, sub({ type: 'exclusive', nackRedeliveryDelayMs: 200 }));
      await send(b, t, 'p', 'nack', 1);
      const counts: number[] = [];
      let nackedAt = 0;
      for (let round = 0; round < 4; round++) {
        const [m] = await pull(c, 1, deadline);
        assert.ok(m, `delivery ${round}`);
        if (round > 0) assert.ok(Date.now() - nackedAt >= 150, `redelivered after ${Date.now() - nackedAt} ms, delay is 200`);
        assert.equal(str(m), 'nack:0');
        assert.equal(m.sequence, 0);
        assert.equal(m.producer, 'p');
        counts.push(m.redeliveryCount);
        nackedAt = Date.now();
        if (round < 3) await c.nack(m, 'try again');
        else await c.ack(m);
      }
      assert.deepEqual(counts, [0, 1, 2, 3]);
      assert.deepEqual(await c.receive(1, quiet), []);
    });

    test('a consumer that closes hands its unacked messages to another', async (b) => {
      const t = nextTopic();
      const a = await b.subscribe(t, sub({ type: 'shared', subscription: 'handover' }));
      await send(b, t, 'p', 'h', 5);
      const held = await pull(a, 5, deadline);
      assert.equal(held.length, 5);
      const other = await factory.create();
      clients.push(other);
      const c = await other.subscribe(t, sub({ type: 'shared', subscription: 'handover' }));
      await a.close();
      const got = await pull(c, 5, deadline);
      assert.deepEqual(got.map(str).sort(), held.map(str).sort());
      for (const m of got) await c.ack(m);
      assert.deepEqual(await c.receive(5, quiet), []);
    });

    test('shared spreads messages over consumers; failover feeds one and fails over', async (b) => {
      const t = nextTopic();
      const other = await factory.create();
      clients.push(other);
      const s1 = await b.subscribe(t, sub({ type: 'shared', subscription: 'sh', receiverQueueSize: 5 }));
      const s2 = await other.subscribe(t, sub({ type: 'shared', subscription: 'sh', receiverQueueSize: 5 }));
      const f1 = await b.subscribe(t, sub({ type: 'failover', subscription: 'fo', receiverQueueSize: 5 }));
      const f2 = await other.subscribe(t, sub({ type: 'failover', subscription: 'fo', receiverQueueSize: 5 }));
      await send(b, t, 'p', 'd', 30);
      // Shared: with 5 unacked each, 10 deliveries need both consumers.
      const first1 = await pull(s1, 5, deadline);
      const first2 = await pull(s2, 5, deadline);
      assert.equal(first1.length, 5);
      assert.equal(first2.length, 5);
      const seen = new Set([...first1, ...first2].map(str));
      for (const m of first1) await s1.ack(m);
      for (const m of first2) await s2.ack(m);
      const drain = async (c: Consumer): Promise<void> => {
        for (;;) {
          const ms = await c.receive(5, quiet);
          if (ms.length === 0) return;
          for (const m of ms) {
            seen.add(str(m));
            await c.ack(m);
          }
        }
      };
      await Promise.all([drain(s1), drain(s2)]);
      assert.equal(seen.size, 30);
      // Failover: one active consumer gets everything.
      const [g1, g2] = await Promise.all([pull(f1, 5, quiet * 3), pull(f2, 5, quiet * 3)]);
      assert.equal(g1.length + g2.length, 5, `failover delivered ${g1.length} + ${g2.length} with receiverQueueSize 5`);
      assert.ok(g1.length === 0 || g2.length === 0, 'only one failover consumer is active');
      const [active, standby, held] = g1.length > 0 ? [f1, f2, g1] : [f2, f1, g2];
      await active.ack(held[0]!);
      await active.close();
      const rest = await pullAck(standby, 29, deadline);
      const all = new Set(rest.map(str));
      for (const m of held.slice(1)) assert.ok(all.has(str(m)), `${str(m)} handed to the standby`);
      assert.equal(rest.length, 29);
    });

    test('failover hands a backlog larger than the standby\'s receiver queue over in per-producer order', async (b) => {
      // Receivers keep exactly-once effects with a mark per producer (the highest sequence
      // applied, appliedMarks.ts): a message redelivered after a later one of its producer was
      // applied counts as applied and is dropped. So a handover must keep per-producer order
      // even when the standby takes the backlog in several receives (a batch of sends lands in
      // one millisecond: entry ids 'ms-0' to 'ms-39' do not sort as text).
      const t = nextTopic();
      const other = await factory.create();
      clients.push(other);
      const f1 = await b.subscribe(t, sub({ type: 'failover', subscription: 'fo-order', receiverQueueSize: 40 }));
      const p = await b.producer(t, { producer: producerId('p') });
      await Promise.all(Array.from({ length: 40 }, (_, i) => p.send(text('o', i)))); // not awaited one by one: many land in one millisecond
      await p.flush();
      await p.close();
      const held = await pull(f1, 40, deadline);
      assert.equal(held.length, 40);
      const f2 = await other.subscribe(t, sub({ type: 'failover', subscription: 'fo-order', receiverQueueSize: 3 }));
      await f1.close();
      const got = await pullAck(f2, 40, deadline);
      assert.deepEqual(got.map(str), held.map(str), 'the standby gets the backlog in the order it was sent');
      assert.deepEqual(await f2.receive(1, quiet), []);
    });

    test('a message nacked past maxRedeliveries goes to the dead-letter topic with its reason', async (b) => {
      const t = nextTopic();
      const c = await b.subscribe(t, sub({ type: 'shared', subscription: 'dlq', maxRedeliveries: 2 }));
      await send(b, t, 'p', 'poison', 1);
      await send(b, t, 'q', 'fine', 1);
      const counts: number[] = [];
      for (let i = 0; i < 3 + 1; i++) {
        const [m] = await pull(c, 1, deadline);
        assert.ok(m, `delivery ${i}`);
        if (str(m) === 'fine:0') {
          await c.ack(m);
          continue;
        }
        counts.push(m.redeliveryCount);
        await c.nack(m, `boom ${m.redeliveryCount}`);
      }
      assert.deepEqual(counts, [0, 1, 2]);
      const dead = await eventually(() => b.deadLetters(t, 'dlq'), (d) => d.length >= 1, deadline, 'dead letter');
      assert.equal(dead.length, 1);
      assert.equal(str(dead[0]!.message), 'poison:0');
      assert.equal(dead[0]!.message.producer, 'p');
      assert.equal(dead[0]!.message.sequence, 0);
      assert.equal(dead[0]!.reason, 'boom 2');
      assert.deepEqual(await c.receive(1, quiet), []);
    });

    test('deadLetter moves a message at once, with its reason, and it is not redelivered', async (b) => {
      const t = nextTopic();
      const c = await b.subscribe(t, sub({ type: 'exclusive', subscription: 'explicit' }));
      await send(b, t, 'p', 'x', 2);
      const got = await pull(c, 2, deadline);
      assert.equal(got.length, 2);
      await c.deadLetter(got[0]!, 'does not decode');
      await c.ack(got[1]!);
      const dead = await eventually(() => b.deadLetters(t, 'explicit'), (d) => d.length >= 1, deadline, 'dead letter');
      assert.deepEqual(dead.map((d) => [str(d.message), d.reason]), [['x:0', 'does not decode']]);
      await c.close();
      const again = await b.subscribe(t, sub({ type: 'exclusive', subscription: 'explicit' }));
      assert.deepEqual(await again.receive(2, quiet), []);
      assert.deepEqual(await b.deadLetters(t, 'other'), []);
    });

    test('receive(n) pulls at most n and times out with []', async (b) => {
      const t = nextTopic();
      const c = await b.subscribe(t, sub({ type: 'exclusive' }));
      const t0 = Date.now();
      assert.deepEqual(await c.receive(5, 300), []);
      assert.ok(Date.now() - t0 >= 250, 'waited for the timeout');
      await send(b, t, 'p', 'r', 10);
      const got: BrokerMessage[] = [];
      const end = Date.now() + deadline;
      while (got.length < 10 && Date.now() < end) {
        const batch = await c.receive(4, 1000);
        assert.ok(batch.length <= 4, `receive(4) returned ${batch.length}`);
        got.push(...batch);
      }
      assert.deepEqual(got.map(str), Array.from({ length: 10 }, (_, i) => `r:${i}`));
      for (const m of got) await c.ack(m);
    });

    test('a consumer that does not ack gets at most receiverQueueSize messages', async (b) => {
      const t = nextTopic();
      const c = await b.subscribe(t, sub({ type: 'shared', receiverQueueSize: 3 }));
      await send(b, t, 'p', 'q', 10);
      const got = await pull(c, 10, quiet * 2);
      assert.equal(got.length, 3);
      await c.ack(got[0]!);
      const more = await pull(c, 10, quiet * 2);
      assert.equal(more.length, 1, 'one ack frees room for one message');
      for (const m of [...got.slice(1), ...more]) await c.ack(m);
      const rest = await pullAck(c, 6, deadline);
      assert.equal(rest.length, 6);
      assert.deepEqual([...got, ...more, ...rest].map(str).sort(), Array.from({ length: 10 }, (_, i) => `q:${i}`).sort());
    });

    test('push consumption through messages$ honours acks', async (b) => {
      const t = nextTopic();
      const c = await b.subscribe(t, sub({ type: 'exclusive', receiverQueueSize: 4 }));
      const seen: string[] = [];
      const done = new Promise<void>((resolve, reject) => {
        const s = c.messages$.subscribe({
          next: (m) => {
            seen.push(str(m));
            c.ack(m).then(() => {
              if (seen.length === 12) {
                s.unsubscribe();
                resolve();
              }
            }, reject);
          },
          error: reject,
        });
      });
      await send(b, t, 'p', 'push', 12);
      await Promise.race([done, new Promise((_, rej) => setTimeout(() => rej(new Error('push timeout')), deadline))]);
      assert.deepEqual(seen, Array.from({ length: 12 }, (_, i) => `push:${i}`));
    });

    for (const codec of ['lz4', 'none'] as CompressionCodec[]) {
      test(`batching + ${codec} compression round-trip payloads, sequences and order`, async (b) => {
        const t = nextTopic();
        const wire = [batching({ maxMessages: 16, maxBytes: 8192, maxDelayMs: 5 }), compression({ codec })];
        const c = composeConsumer(await b.subscribe(t, sub({ type: 'exclusive', receiverQueueSize: 8 })), ...wire);
        const p = composeProducer(await b.producer(t, { producer: producerId('batcher') }), ...wire);
        const body = (i: number): Uint8Array =>
          i % 3 === 0 ? new TextEncoder().encode(`${i}:` + 'compressible '.repeat(i % 50)) : Uint8Array.from({ length: i % 40 }, (_, k) => (i * 31 + k * 7) & 255);
        const sends: Promise<void>[] = [];
        for (let i = 0; i < 200; i++) sends.push(p.send(body(i)));
        await Promise.all(sends);
        await p.flush();
        const got = await pullAck(c, 200, deadline);
        assert.equal(got.length, 200);
        assert.deepEqual(got.map((m) => m.sequence), Array.from({ length: 200 }, (_, i) => i));
        for (const m of got) assert.deepEqual(m.payload, body(m.sequence), `payload of ${m.sequence}`);
        assert.ok(new Set(got.map((m) => m.id)).size === 200, 'unpacked ids are distinct');
        assert.deepEqual(await c.receive(1, quiet), []);
        await p.close();
      });
    }

    test('a nack inside a batch redelivers the whole batch', async (b) => {
      const t = nextTopic();
      const wire = [batching({ maxMessages: 4, maxDelayMs: 1000 }), compression({ codec: 'lz4' })];
      const c = composeConsumer(await b.subscribe(t, sub({ type: 'shared', subscription: 'batchnack' })), ...wire);
      const p = composeProducer(await b.producer(t, { producer: producerId('batcher') }), ...wire);
      await Promise.all([0, 1, 2, 3].map((i) => p.send(text('bn', i))));
      const first = await pull(c, 4, deadline);
      assert.deepEqual(first.map(str), ['bn:0', 'bn:1', 'bn:2', 'bn:3']);
      await c.ack(first[0]!);
      await c.nack(first[1]!, 'one bad apple');
      await c.ack(first[2]!); // ignored: the batch is already nacked
      const again = await pullAck(c, 4, deadline);
      assert.deepEqual(again.map(str), ['bn:0', 'bn:1', 'bn:2', 'bn:3']);
      assert.ok(again.every((m) => m.redeliveryCount === 1), `redeliveryCount ${again.map((m) => m.redeliveryCount)}`);
      await p.close();
    });

    test('malformed entries are dead-lettered alone with their reason; the rest of their batch is delivered once', async (b) => {
      const t = nextTopic();
      const max = factory.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
      const p = await b.producer(t, { producer: producerId('good') });
      // Written before anyone subscribes, so that one read (one XREADGROUP batch) holds them all.
      const foreign: ForeignEntry[] = [
        {},
        { payload: text('bad-seq', 0), producer: 'foreign', sequence: 'abc' },
        { payload: new Uint8Array(max + 1).fill(7), producer: 'foreign', sequence: '7' },
        { payload: text('no-producer', 0), sequence: '3' },
        { payload: text('neg-seq', 0), producer: 'foreign', sequence: '-1' },
      ];
      for (let i = 0; i < foreign.length; i++) {
        await p.send(text('ok', i));
        await factory.injectForeign(t, foreign[i]!);
      }
      await p.send(text('ok', foreign.length));
      await p.flush();
      const c = await b.subscribe(t, sub({ type: 'shared', subscription: 'malformed' }));
      const reported: DeadLetter[] = [];
      c.malformed$?.subscribe((d) => reported.push(d));
      const got = await pullAck(c, foreign.length + 1, deadline);
      assert.deepEqual(got.map(str), Array.from({ length: foreign.length + 1 }, (_, i) => `ok:${i}`));
      assert.ok(got.every((m) => m.producer === 'good' && m.redeliveryCount === 0));
      const dead = await eventually(() => b.deadLetters(t, 'malformed'), (d) => d.length >= foreign.length, deadline, 'malformed dead letters');
      assert.equal(dead.length, foreign.length);
      assert.ok(dead.every((d) => d.malformed === true), 'flagged malformed');
      const reasons = dead.map((d) => d.reason);
      assert.match(reasons[0]!, /no fields of a shardflow message/);
      assert.match(reasons[1]!, /bad sequence "abc"/);
      assert.match(reasons[2]!, new RegExp(`oversized payload of ${max + 1} bytes exceeds maxPayloadBytes ${max}`));
      assert.match(reasons[3]!, /missing field .*producer/);
      assert.match(reasons[4]!, /bad sequence "-1"/);
      assert.equal(str(dead[1]!.message), 'bad-seq:0', 'the dead letter keeps the payload');
      assert.equal(dead[2]!.message.payload.byteLength, max + 1);
      await eventually(async () => reported.length, (n) => n === foreign.length, deadline, 'reported on malformed$');
      assert.deepEqual(reported.map((d) => d.reason), reasons);
      // Acked: neither this consumer nor a new one (which gets all unacked entries) sees any again.
      assert.deepEqual(await c.receive(10, quiet), []);
      await c.close();
      const again = await b.subscribe(t, sub({ type: 'shared', subscription: 'malformed' }));
      assert.deepEqual(await again.receive(10, quiet), []);
      assert.equal((await b.deadLetters(t, 'malformed')).length, foreign.length, 'dead-lettered once');
      await p.close();
    });

    test('an undecodable batch envelope or compression frame is dead-lettered alone; the other batches are delivered', async (b) => {
      const t = nextTopic();
      const wire = [batching({ maxMessages: 2, maxDelayMs: 1000 }), compression({ codec: 'lz4' })];
      const p = composeProducer(await b.producer(t, { producer: producerId('batcher') }), ...wire);
      // Tag 0x00 (uncompressed), then an envelope announcing 3 items that holds one.
      const truncated = Uint8Array.from([0x00, 0x42, 0x01, 0, 0, 0, 3, ...new Uint8Array(8), 0, 0, 0, 2, 0x61, 0x62]);
      // Tag 0x01 (lz4), size 100, then a literal run that overruns the body.
      const corrupt = Uint8Array.from([0x01, 100, 0, 0, 0, 0xf0, 0x00]);
      await Promise.all([p.send(text('b', 0)), p.send(text('b', 1))]);
      await factory.injectForeign(t, { payload: truncated, producer: 'batcher', sequence: '100' });
      await Promise.all([p.send(text('b', 2)), p.send(text('b', 3))]);
      await factory.injectForeign(t, { payload: corrupt, producer: 'batcher', sequence: '101' });
      await Promise.all([p.send(text('b', 4)), p.send(text('b', 5))]);
      await p.flush();
      const c = composeConsumer(await b.subscribe(t, sub({ type: 'exclusive', subscription: 'envelope' })), ...wire);
      const reported: DeadLetter[] = [];
      c.malformed$?.subscribe((d) => reported.push(d));
      const got = await pullAck(c, 6, deadline);
      assert.deepEqual(got.map(str), ['b:0', 'b:1', 'b:2', 'b:3', 'b:4', 'b:5']);
      // The two are dead-lettered by different interceptors, concurrently: order by sequence.
      const dead = (await eventually(() => b.deadLetters(t, 'envelope'), (d) => d.length >= 2, deadline, 'envelope dead letters')).sort(
        (x, y) => x.message.sequence - y.message.sequence,
      );
      assert.equal(dead.length, 2);
      assert.match(dead[0]!.reason, /undecodable batch envelope: batch envelope truncated at item 1 of 3/);
      assert.match(dead[1]!.reason, /undecodable compression frame: corrupt lz4 payload/);
      assert.deepEqual(dead.map((d) => d.message.sequence), [100, 101]);
      assert.deepEqual([...dead[0]!.message.payload], [...truncated], 'the bytes as they were on the wire');
      await eventually(async () => reported.length, (n) => n === 2, deadline, 'reported on malformed$');
      assert.deepEqual(await c.receive(1, quiet), []);
      await p.close();
    });

    test('send refuses a payload over maxPayloadBytes', async (b) => {
      const t = nextTopic();
      const max = factory.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
      const p = await b.producer(t, { producer: producerId('big') });
      await assert.rejects(p.send(new Uint8Array(max + 1)), (e: unknown) => isShardflowError(e) && e.code === 'SF_ERR_PAYLOAD_TOO_LARGE' && e instanceof InvalidArgumentError);
      await p.send(new Uint8Array(max));
      await p.close();
    });

    if (factory.loseData) {
      const loseData = factory.loseData;
      test('a live consumer whose topic data is deleted fails with BrokerDataLostError', async (b) => {
        const t = nextTopic();
        const pulled = await b.subscribe(t, sub({ type: 'shared', subscription: 'lost-pull' }));
        const pushed = await b.subscribe(t, sub({ type: 'exclusive', subscription: 'lost-push' }));
        const pushError = new Promise<unknown>((resolve) => pushed.messages$.subscribe({ error: resolve, complete: () => resolve('completed') }));
        await send(b, t, 'p', 'lost', 3);
        const held = await pull(pulled, 1, deadline);
        assert.equal(held.length, 1);
        await loseData(t);
        const isLoss = (e: unknown, subscription: string): boolean =>
          isShardflowError(e) && e.code === 'SF_ERR_BROKER_DATA_LOST' && (e as unknown as { subscription: string }).subscription === subscription &&
          (e as unknown as { topic: string }).topic === `${t.namespace}/${t.partition}` && e.message.includes(subscription);
        // Pull: drain what was delivered before the loss, then receive fails.
        const failure = await (async () => {
          const end = Date.now() + deadline;
          while (Date.now() < end) {
            try {
              await pulled.receive(10, 500);
            } catch (err) {
              return err;
            }
          }
          return undefined;
        })();
        assert.ok(isLoss(failure, 'lost-pull'), `receive failed with ${String(failure)}`);
        await assert.rejects(pulled.ack(held[0]!), (e: unknown) => isLoss(e, 'lost-pull'), 'an ack after the loss says so');
        const pushFailure = await Promise.race([pushError, new Promise((r) => setTimeout(() => r('no error'), deadline))]);
        assert.ok(isLoss(pushFailure, 'lost-push'), `messages$ ended with ${String(pushFailure)}`);
        // Closing after the loss is clean (no "resources may leak").
        await pulled.close();
        await pushed.close();
      });
    }

    if (factory.restart) {
      const restart = factory.restart;
      test('a broker process restart loses nothing', async (b) => {
        const t = nextTopic();
        const c = await b.subscribe(t, sub({ type: 'shared', subscription: 'restart' }));
        // A consumer that stays open through the restart: it must reconnect, not take the
        // restart for lost data (BrokerDataLostError), and get every message.
        const keeper = await factory.create();
        clients.push(keeper);
        const live = await keeper.subscribe(t, sub({ type: 'shared', subscription: 'restart-live' }));
        await send(b, t, 'p', 'rs', 20);
        const first = await pull(c, 5, deadline);
        assert.equal(first.length, 5);
        for (const m of first) await c.ack(m);
        await c.close();
        await b.close();
        await restart();
        const after = await factory.create();
        clients.push(after);
        await send(after, t, 'p', 'rs', 10, 20);
        const c2 = await after.subscribe(t, sub({ type: 'shared', subscription: 'restart' }));
        const rest = await pullAck(c2, 25, deadline * 2);
        const names = new Set(rest.map(str));
        for (let i = 5; i < 30; i++) assert.ok(names.has(`rs:${i}`), `rs:${i} survived the restart`);
        const seen = new Set<string>();
        const end = Date.now() + deadline * 2;
        while (seen.size < 30 && Date.now() < end) {
          for (const m of await live.receive(30, 1000)) {
            seen.add(str(m));
            await live.ack(m).catch(() => undefined); // an ack lost to the restart only means a redelivery
          }
        }
        assert.equal(seen.size, 30, `the consumer that stayed open got ${seen.size} of 30`);
      });
    }
  });
}
