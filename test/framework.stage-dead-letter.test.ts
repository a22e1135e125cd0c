import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ChaosPolicy, FlowCounters, InvalidArgumentError, MemoryBroker, Topology, decodeInt64, defineNamespace, encodeInt64, hostOf, int64Add,
  msgpackCodec, producerId, type BrokerMessage, type Consumer, type Logger, type StageDef, type StageOutputs,
} from '../src/index.js';
import { Store } from '../src/storage/index.js';
import { topic } from '../src/runtime/topics.js';
import { partitionId } from '../src/runtime/ids.js';
import { StreamMarks } from '../src/runtime/stream/appliedMarks.js';
import { applyStageBatch, type StageBatchContext } from '../src/runtime/stream/applyBatch.js';
import { StreamOutbox } from '../src/runtime/stream/outbox.js';
import { stageColumnFamilies } from '../src/runtime/stream/reserved.js';
import { tempDir } from './kit/datasets.js';

/**
 * One bad message does not fail its batch (issue 14): `ctx.deadLetter(reason)` and a throw
 * that `onError` (or its default) sends to the dead-letter topic take back that message's
 * writes and emits alone (a save point of the batch), the message is dead-lettered with its
 * reason, and the rest of the batch commits exactly once. Errors decided `'fail'`, a throw
 * from `onBatch`, and the stage context refusing a call still fail the batch. A dead letter
 * decided in a committed batch survives a crash before the broker took it.
 */
interface Visit { readonly key: string; readonly url: string; readonly kind: 'ok' | 'reject' | 'invalid' | 'range' }
interface HostHit { readonly url: string }
const isVisit = (v: unknown): v is Visit => typeof (v as Visit)?.key === 'string' && typeof (v as Visit).url === 'string';
const isHostHit = (v: unknown): v is HostHit => typeof (v as HostHit)?.url === 'string';
const quiet: Logger = { debug() {}, warn() {}, error() {} };

function visitsTopology(onError?: StageDef<Visit, StageOutputs, 'seen', unknown, unknown>['onError']) {
  const visits = defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 2, key: (v: Visit) => v.key });
  // Routed by the URL's host: hostOf throws InvalidUrlError for a URL without scheme://host.
  const hits = defineNamespace('host-hits', { codec: msgpackCodec('HostHit', isHostHit), partitions: 2, key: (h: HostHit) => hostOf(h.url) });
  const topology = Topology.create('dead-letter-test')
    .stage('visits', {
      input: visits,
      outputs: { hits },
      columnFamilies: { seen: { mergeOperator: int64Add() } },
      batching: { maxCount: 32, maxDelayMs: 10 },
      ...(onError ? { onError } : {}),
      onMessage(ctx, v) {
        ctx.writes.merge('seen', v.key, encodeInt64(1));
        ctx.emit('hits', { url: v.url });
        if (v.kind === 'reject') {
          ctx.deadLetter(`rejected ${v.key}`);
          ctx.writes.merge('seen', 'after-dead-letter', encodeInt64(1)); // taken back too
        }
        if (v.kind === 'invalid') throw new InvalidArgumentError(`visit ${v.key} is invalid`);
        if (v.kind === 'range') throw new RangeError(`visit ${v.key} is out of range`);
      },
      async query(reads, _q: 'seen') {
        const out = new Map<string, number>();
        for await (const [k, n] of reads.iterate('seen')) out.set(k.toString(), Number(decodeInt64(n)));
        return out;
      },
    })
    .stage('hosts', {
      input: hits,
      columnFamilies: { hits: { mergeOperator: int64Add() } },
      onMessage: (ctx, h) => ctx.writes.merge('hits', hostOf(h.url), encodeInt64(1)),
      async query(reads, _q: 'hits') {
        const out = new Map<string, number>();
        for await (const [k, n] of reads.iterate('hits')) out.set(k.toString(), Number(decodeInt64(n)));
        return out;
      },
    });
  return { visits, topology };
}

test('poison messages are dead-lettered with their reasons and the rest of each batch commits exactly once, under chaos', { timeout: 240_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-dead-letter-');
  const broker = new MemoryBroker();
  const { visits, topology } = visitsTopology(); // the default onError
  const running = await topology.start({ broker, dataDir: dir, logger: quiet, chaos: ChaosPolicy.create({ rate: 0.05, seed: 3 }) });
  try {
    const producer = await running.producer(visits, 'visits-src');
    const seen = new Map<string, number>();
    const hosts = new Map<string, number>();
    const expectedDead: string[] = [];
    for (let i = 0; i < 400; i++) {
      const key = `k${i % 37}`;
      const v: Visit =
        i % 50 === 7 ? { key, url: `http://h${i % 5}.example/${i}`, kind: 'reject' }
        : i % 50 === 19 ? { key, url: `no-scheme-${i}`, kind: 'ok' }
        : i % 50 === 31 ? { key, url: `http://h${i % 5}.example/${i}`, kind: 'invalid' }
        : { key, url: `http://h${i % 5}.example/${i}`, kind: 'ok' };
      await producer.send(v);
      if (v.kind === 'reject') expectedDead.push(`rejected ${key}`);
      else if (v.url.startsWith('no-scheme')) expectedDead.push(`onMessage threw InvalidUrlError (SF_ERR_INVALID_URL): URL has no scheme://host: "${v.url}"`);
      else if (v.kind === 'invalid') expectedDead.push(`onMessage threw InvalidArgumentError (SF_ERR_INVALID_ARGUMENT): visit ${key} is invalid`);
      else {
        seen.set(key, (seen.get(key) ?? 0) + 1);
        const host = hostOf(v.url);
        hosts.set(host, (hosts.get(host) ?? 0) + 1);
      }
    }
    await running.quiescence({ timeoutMs: 180_000 });
    const dead = await running.deadLetters('visits');
    assert.deepEqual(dead.map((d) => d.reason).sort(), expectedDead.sort(), 'each poison message dead-lettered once, with its reason');
    assert.deepEqual(new Map((await running.askAll('visits', 'seen')).flatMap((m) => [...m])), seen, 'the writes of the kept messages, once each');
    assert.deepEqual(new Map((await running.askAll('hosts', 'hits')).flatMap((m) => [...m])), hosts, 'the emits of the kept messages, once each');
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

test('onError decides: a RangeError it sends to the dead-letter topic costs one message, not the batch', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-on-error-');
  const broker = new MemoryBroker();
  const { visits, topology } = visitsTopology((err) => (err instanceof RangeError ? 'dead-letter' : 'fail'));
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  let restarts = 0;
  running.system.events$.subscribe((e) => void (e.type === '@shardflow.restarted' && restarts++));
  try {
    const producer = await running.producer(visits, 'visits-src');
    await producer.send({ key: 'a', url: 'http://a.example/1', kind: 'ok' });
    await producer.send({ key: 'a', url: 'http://a.example/2', kind: 'range' });
    await producer.send({ key: 'a', url: 'http://a.example/3', kind: 'ok' });
    await running.quiescence({ timeoutMs: 60_000 });
    assert.deepEqual((await running.deadLetters('visits')).map((d) => d.reason), ['onMessage threw RangeError: visit a is out of range']);
    assert.deepEqual(new Map((await running.askAll('visits', 'seen')).flatMap((m) => [...m])), new Map([['a', 2]]));
    assert.equal(restarts, 0, 'no batch failed');
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

/** One stage partition's batch applied directly (what stageActor does per delivery), on a real store and the memory broker. */
async function directStage(def: StageDef<any, StageOutputs, string, unknown, unknown>) {
  const { dir, cleanup } = tempDir('sf-apply-batch-');
  const broker = new MemoryBroker();
  const store = await Store.open({ path: dir, columnFamilies: stageColumnFamilies(def.columnFamilies ?? {}) });
  const counters = new FlowCounters();
  const t = topic(def.input.name, partitionId(0));
  const producer = await broker.producer(t, { producer: producerId('src') });
  const send = (value: unknown) => producer.send(def.input.codec.encode(value));
  const subscribe = () => broker.subscribe(t, { subscription: 'stage', type: 'failover' });
  const context = async (): Promise<StageBatchContext> => ({
    partition: partitionId(0),
    namespace: def.input.name,
    def,
    store,
    reads: { get: (cf, k) => store.get(cf, k), iterate: (cf, o) => store.iterate(cf, o), snapshot: () => store.snapshot() },
    marks: new StreamMarks(store, 'stage'),
    outbox: await StreamOutbox.open({ store, broker, owner: 'stage', producer: producerId('stage@0'), counters }),
    counters,
  });
  const close = async () => {
    await store.close();
    await broker.close();
    cleanup();
  };
  return { broker, store, t, send, subscribe, context, close };
}

const counted = (onMessage: StageDef<Visit, StageOutputs, 'seen', unknown, unknown>['onMessage'], extra: Partial<StageDef<Visit, StageOutputs, 'seen', unknown, unknown>> = {}) => ({
  input: defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 1, key: (v: Visit) => v.key }),
  columnFamilies: { seen: { mergeOperator: int64Add() } },
  onMessage,
  ...extra,
}) as StageDef<any, StageOutputs, string, unknown, unknown>;

test('errors that fail the batch: unknown errors by default, onError saying fail or answering nonsense, onBatch, and the context refusing a call', async () => {
  const cases: Array<[string, StageDef<any, StageOutputs, string, unknown, unknown>, RegExp]> = [
    ['a TypeError (default: fail)', counted((_ctx, v) => void (v as unknown as { missing: { x: number } }).missing.x), /Cannot read properties of undefined/],
    ['onError says fail', counted(() => { throw new InvalidArgumentError('bad'); }, { onError: () => 'fail' }), /bad/],
    ['onError answers nonsense', counted(() => { throw new RangeError('r'); }, { onError: (() => 'skip') as never }), /onError must return 'dead-letter' or 'fail', got "skip"/],
    ['onBatch throws', counted((ctx, v) => ctx.writes.merge('seen', v.key, encodeInt64(1)), { onBatch: () => { throw new InvalidArgumentError('batch-wide'); } }), /batch-wide/],
    ['deadLetter in onBatch', counted(undefined, { onBatch: (ctx) => ctx.deadLetter('no') }), /ctx.deadLetter is for onMessage/],
    ['a write to an undeclared column family', counted((ctx, v) => (ctx.writes as { put: Function }).put('nope', v.key, encodeInt64(1))), /unknown column family "nope"/],
    ['emit to a namespace that is not an output', counted((ctx) => (ctx as unknown as { emit: Function }).emit('elsewhere', {})), /not an output of this stage/],
  ];
  for (const [name, def, error] of cases) {
    const s = await directStage(def);
    try {
      await s.send({ key: 'a', url: 'http://a.example/', kind: 'ok' });
      const consumer = await s.subscribe();
      const messages = await consumer.receive(10, 1000);
      await assert.rejects(applyStageBatch(await s.context(), consumer, messages), error, name);
      assert.equal(await s.store.get('seen', 'a'), undefined, `${name}: nothing committed`);
      assert.deepEqual(await s.broker.deadLetters(s.t, 'stage'), [], `${name}: nothing dead-lettered`);
    } finally {
      await s.close();
    }
  }
});

test('a dead letter decided in a committed batch is sent again, with its reason, when the process died before the broker took it', async () => {
  const s = await directStage(counted((ctx, v) => {
    ctx.writes.merge('seen', v.key, encodeInt64(1));
    if (v.kind === 'reject') ctx.deadLetter(`rejected ${v.url}`);
  }));
  try {
    await s.send({ key: 'a', url: 'http://a.example/1', kind: 'ok' });
    await s.send({ key: 'a', url: 'http://a.example/2', kind: 'reject' });
    await s.send({ key: 'a', url: 'http://a.example/3', kind: 'ok' });
    const first = await s.subscribe();
    const messages = await first.receive(10, 1000);
    assert.equal(messages.length, 3);
    // The process "dies" after the commit, when the dead letter goes to the broker.
    const dying: Consumer = {
      messages$: first.messages$,
      receive: (max, timeoutMs) => first.receive(max, timeoutMs),
      ack: (m) => first.ack(m),
      nack: (m, reason) => first.nack(m, reason),
      deadLetter: async () => { throw new Error('process killed'); },
      close: () => first.close(),
    };
    await assert.rejects(applyStageBatch(await s.context(), dying, messages), /process killed/);
    assert.equal(decodeInt64((await s.store.get('seen', 'a'))!), 2n, 'the batch committed, without the rejected message');
    await first.close(); // unacked messages go back to the subscription

    const second = await s.subscribe();
    const again: BrokerMessage[] = await second.receive(10, 1000);
    const report = await applyStageBatch(await s.context(), second, again);
    assert.deepEqual({ skipped: report.skipped, deadLettered: report.deadLettered, applied: report.applied }, { skipped: again.length - 1, deadLettered: 1, applied: 0 });
    assert.deepEqual((await s.broker.deadLetters(s.t, 'stage')).map((d) => d.reason), ['rejected http://a.example/2']);
    assert.equal(decodeInt64((await s.store.get('seen', 'a'))!), 2n, 'applied once');
    const rows: string[] = [];
    for await (const [k] of s.store.iterate('sf.meta', { prefix: 'dead\u0000' })) rows.push(k.toString());
    assert.deepEqual(rows, [], 'the stored reason is gone once the broker took the dead letter');
    await second.close();
  } finally {
    await s.close();
  }
});

// Found by a new user: an entry that did not decode, written under a live producer's name with
// sequence 2,900 (a foreign or broken producer), was dead-lettered and moved that producer's
// mark to 2,900, so its next 557 real messages were skipped as applied, in silence.
test('an undecodable entry under a live producer\'s name moves its mark only at its next sequence, and a real message of a sequence it took is dead-lettered as such, never skipped', async () => {
  const s = await directStage(counted((ctx, v) => ctx.writes.merge('seen', v.key, encodeInt64(1))));
  try {
    await s.send({ key: 'a', url: 'http://a.example/0', kind: 'ok' }); // sequence 0
    s.broker.appendRaw(s.t, { payload: Buffer.from('not msgpack at all'), producer: 'src', sequence: '2900' });
    // The first of a newer epoch (found by a second new user: it moved the mark to that epoch,
    // and the live producer's later messages were refused as an older incarnation's).
    s.broker.appendRaw(s.t, { payload: Buffer.from('not msgpack either'), producer: 'src', sequence: String(2 ** 32) });
    await s.send({ key: 'a', url: 'http://a.example/1', kind: 'ok' }); // 1
    await s.send({ key: 'a', url: 'http://a.example/2', kind: 'ok' }); // 2
    // Its next sequence: it moves the mark (quiet detection counts a real producer's message
    // that does not decode), and records that it took the sequence.
    s.broker.appendRaw(s.t, { payload: Buffer.from([0xc1]), producer: 'src', sequence: '3' });
    const consumer = await s.subscribe();
    const messages = await consumer.receive(10, 1000);
    assert.equal(messages.length, 6);
    const ctx = await s.context();
    const report = await applyStageBatch(ctx, consumer, messages);
    assert.deepEqual([report.applied, report.deadLettered, report.skipped], [3, 3, 0]);
    assert.equal(decodeInt64((await s.store.get('seen', 'a')) as Buffer), 3n, 'the real messages after the foreign entries are applied');
    assert.equal(await ctx.marks.mark(producerId('src')), 3, 'the foreign sequences far above did not move the mark; the next one did');
    assert.equal((await s.broker.deadLetters(s.t, 'stage')).length, 3);
    // The real message of sequence 3 is not skipped as a copy (found by a second new user: it
    // was, in silence): it is dead-lettered with a reason that says another entry took it.
    await s.send({ key: 'a', url: 'http://a.example/3', kind: 'ok' });
    const next = await consumer.receive(10, 1000);
    const after = await applyStageBatch(await s.context(), consumer, next);
    assert.deepEqual([after.applied, after.skipped, after.deadLettered], [0, 0, 1]);
    const dead = await s.broker.deadLetters(s.t, 'stage');
    assert.match(dead[dead.length - 1]!.reason, /^producer src sequence 3 was taken by an undecodable entry dead-lettered before, with another payload: two producers under one name, or a foreign entry under this producer's name$/);
  } finally {
    await s.close();
  }
});
