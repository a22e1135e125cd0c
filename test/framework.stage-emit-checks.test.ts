import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  JobStalledError, MemoryBroker, Topology, decodeInt64, defineNamespace, encodeInt64, int64Add, msgpackCodec,
  type Broker, type Logger,
} from '../src/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * What a stage emits is checked where its handler can still be refused (found by a new user
 * of the framework): a value over the broker's `maxPayloadBytes` and a value the output
 * codec's guard refuses are dead-lettered at the emitting stage with their reasons, its
 * writes taken back, instead of a committed outbox row that no send takes (which restarted the
 * partition until the topology stopped, and left a data dir that could not start) or a dead
 * letter at the receiver while the sender's effects stayed. A row committed anyway (a broker
 * that does not tell its limit) stops the topology with a reason that says what would publish
 * it. And `stop()` is bounded: a handler that never returns makes it throw, naming the
 * partition, instead of waiting forever.
 */
interface In { readonly k: string; readonly kind: 'ok' | 'big' | 'refused' | 'hang' }
interface Out { readonly k: string; readonly body: string }
const isIn = (v: unknown): v is In => typeof (v as In)?.k === 'string' && typeof (v as In).kind === 'string';
const isOut = (v: unknown): v is Out => typeof (v as Out)?.k === 'string' && typeof (v as Out).body === 'string' && (v as Out).body !== 'REFUSED';
const quiet: Logger = { debug() {}, warn() {}, error() {} };
const LIMIT = 64 * 1024;

function emittingTopology() {
  const ins = defineNamespace('ins', { codec: msgpackCodec('In', isIn), partitions: 2, key: (v: In) => v.k });
  const outs = defineNamespace('outs', { codec: msgpackCodec('Out', isOut), partitions: 2, key: (v: Out) => v.k });
  const count = async (reads: { get(cf: string, k: string): Promise<Buffer | undefined> }, k: string) => Number(decodeInt64((await reads.get('n', k)) ?? encodeInt64(0)));
  const topology = Topology.create('emit-checks')
    .stage('emitter', {
      input: ins,
      outputs: { outs },
      columnFamilies: { n: { mergeOperator: int64Add() } },
      async onMessage(ctx, v) {
        ctx.writes.merge('n', v.k, encodeInt64(1));
        if (v.kind === 'hang') await new Promise(() => {});
        ctx.emit('outs', { k: v.k, body: v.kind === 'big' ? 'y'.repeat(LIMIT + 1) : v.kind === 'refused' ? 'REFUSED' : 'ok' });
      },
      query: (reads, k: string) => count(reads, k),
    })
    .stage('sink', {
      input: outs,
      columnFamilies: { n: { mergeOperator: int64Add() } },
      onMessage: (ctx, v) => ctx.writes.merge('n', v.k, encodeInt64(1)),
      query: (reads, k: string) => count(reads, k),
    });
  return { ins, topology };
}

test('an emit over the broker limit or refused by the output guard is dead-lettered at the emitting stage, its writes taken back', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-emit-checks-');
  const broker = new MemoryBroker({ maxPayloadBytes: LIMIT });
  const { ins, topology } = emittingTopology();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const p = await running.producer(ins, 'src');
    for (let i = 0; i < 10; i++) await p.send({ k: 'a', kind: 'ok' });
    await p.send({ k: 'a', kind: 'big' });
    await p.send({ k: 'a', kind: 'refused' });
    for (let i = 0; i < 10; i++) await p.send({ k: 'a', kind: 'ok' });
    await running.quiescence({ timeoutMs: 30_000 });
    const dead = await running.deadLetters('emitter');
    assert.equal(dead.length, 2);
    const reasons = dead.map((d) => d.reason).sort();
    assert.match(reasons.find((r) => r.includes('PayloadTooLargeError')) ?? '', new RegExp(`emit to "outs" \\(outs/\\d\\): the value encodes to \\d+ bytes, over the broker's maxPayloadBytes \\(${LIMIT}\\)`));
    assert.match(reasons.find((r) => r.includes('InvalidArgumentError')) ?? '', /Out: value does not have the expected shape \(refused at the send\)/);
    assert.deepEqual(await running.deadLetters('sink'), []);
    // The two dead-lettered messages' merges were taken back: both stages counted the 20 others.
    assert.equal(await running.askKey('emitter', 'a', 'a'), 20);
    assert.equal(await running.askKey('sink', 'a', 'a'), 20);
    await running.stop();
  } finally {
    await running.stop().catch(() => undefined);
    await broker.close();
    cleanup();
  }
});

test('a committed row that the broker refuses as too large stops the topology with what would publish it', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-emit-row-');
  const inner = new MemoryBroker({ maxPayloadBytes: LIMIT });
  // A broker that does not tell its limit: emits go unchecked and the send refuses the row.
  const broker: Broker = {
    kind: inner.kind,
    producer: (t, o) => inner.producer(t, o),
    subscribe: (t, o) => inner.subscribe(t, o),
    deadLetters: (t, s) => inner.deadLetters(t, s),
    close: () => inner.close(),
  };
  const { ins, topology } = emittingTopology();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const p = await running.producer(ins, 'src');
    await p.send({ k: 'a', kind: 'big' });
    await assert.rejects(running.quiescence({ timeoutMs: 60_000 }), (err: Error) => {
      assert.match(err.message, /outbox row \d+ of emitter for outs\/\d \(\d+ bytes, committed\) is over this broker's maxPayloadBytes \(65536\).*start on a broker whose maxPayloadBytes is at least \d+/);
      return true;
    });
  } finally {
    await running.stop({ timeoutMs: 10_000 }).catch(() => undefined);
    await inner.close();
    cleanup();
  }
});

test('stop() gives up after its timeout when a handler never returns, naming the partition', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-emit-hang-');
  const broker = new MemoryBroker();
  const { ins, topology } = emittingTopology();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const p = await running.producer(ins, 'src');
    await p.send({ k: 'a', kind: 'hang' });
    await new Promise((r) => setTimeout(r, 500)); // the emitter's handler has the message
    const t0 = Date.now();
    await assert.rejects(running.stop({ timeoutMs: 1_000 }), (err: Error) => {
      assert.ok(err instanceof JobStalledError, String(err));
      assert.match(err.message, /topology emit-checks did not stop within 1000 ms: .*\/emitter\/p\d.* still running/);
      return true;
    });
    assert.ok(Date.now() - t0 < 5_000, `stop() took ${Date.now() - t0} ms`);
  } finally {
    await broker.close();
    cleanup();
  }
});
