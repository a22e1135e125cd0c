import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Broker, BrokerMessage, Consumer, SubscribeOptions } from '../../src/runtime/brokers/broker.js';
import { batching } from '../../src/runtime/brokers/interceptors/batching.js';
import { composeConsumer, composeProducer } from '../../src/runtime/brokers/interceptors/compose.js';
import { compression, type CompressionCodec } from '../../src/runtime/brokers/interceptors/compression.js';
import { partitionId, producerId, sequence } from '../../src/runtime/ids.js';
import { Namespaces, topic, type Topic } from '../../src/runtime/topics.js';

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
}

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
  return () => topic(Namespaces.links, partitionId(base + n++));
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

    if (factory.restart) {
      const restart = factory.restart;
      test('a broker process restart loses nothing', async (b) => {
        const t = nextTopic();
        const c = await b.subscribe(t, sub({ type: 'shared', subscription: 'restart' }));
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
      });
    }
  });
}
