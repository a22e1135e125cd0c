import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  MemoryBroker, SupervisorStrategy, Topology, UndecodableMessageError, decodeInt64, defineNamespace, encodeInt64, int64Add,
  msgpackCodec, type Logger,
} from '../src/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * A codec guard may throw to give its reason: `decode` turns the throw (a TypeError, a plain
 * Error) into an UndecodableMessageError `<codec>: <reason>`, so a stage dead-letters that
 * message with the reason and goes on, instead of failing its batch and restarting its
 * partition on the same message until the supervisor gives up.
 */
interface Visit { readonly key: string; readonly url: string }
const isVisit = (v: unknown): v is Visit => {
  if (typeof (v as Visit)?.key !== 'string') return false;
  if (!/^https?:\/\//.test((v as Visit).url)) throw new Error(`url ${JSON.stringify((v as Visit).url)} is not http(s)`);
  return true;
};
const quiet: Logger = { debug() {}, warn() {}, error() {} };

// Found by a new user: text bytes said "Data read, but end of buffer not reached 110", and the
// byte 0xC1 (which msgpackr reads as a marker object) failed the guard with that object's JSON.
test('msgpackCodec: bytes that are not msgpack say so with their length and first bytes (and text when they are text)', () => {
  const codec = msgpackCodec('Visit', isVisit);
  assert.throws(() => codec.decode(Buffer.from('not msgpack at all')), (err: unknown) =>
    err instanceof UndecodableMessageError && /^Visit: bytes are not msgpack \(.*; 18 bytes, starting 6e 6f 74 20 .* \.\.\., text "not msgpack at a\.\.\."\)$/.test(err.message));
  assert.throws(() => codec.decode(Buffer.from([0xc1])), (err: unknown) =>
    err instanceof UndecodableMessageError && err.message === 'Visit: bytes are not msgpack (0xC1, a byte msgpack never uses; 1 byte, starting c1)');
  assert.throws(() => codec.decode(Buffer.from([0x92, 0x01])), /^UndecodableMessageError|Visit: bytes are not msgpack \(.*; 2 bytes, starting 92 01\)$/);
});

test('msgpackCodec: a guard that throws gives UndecodableMessageError with its reason; false gives the shape reason', () => {
  const codec = msgpackCodec('Visit', isVisit);
  assert.deepEqual(codec.decode(codec.encode({ key: 'a', url: 'http://a.example/' })), { key: 'a', url: 'http://a.example/' });
  assert.throws(() => codec.decode(codec.encode({ key: 'a', url: 'ftp://a.example/' })), (err: unknown) =>
    err instanceof UndecodableMessageError && err.message === 'Visit: url "ftp://a.example/" is not http(s)' && err.cause instanceof Error);
  assert.throws(() => codec.decode(codec.encode({ url: 'http://a.example/' } as unknown as Visit)), /Visit: value does not have the expected shape/);
  const nullSafe = msgpackCodec('Visit', (v): v is Visit => (v as { url: string }).url.length > 0); // throws a TypeError on null
  assert.throws(() => nullSafe.decode(nullSafe.encode(null as unknown as Visit)), (err: unknown) =>
    err instanceof UndecodableMessageError && /^Visit: Cannot read properties of null/.test(err.message));
});

test('a stage dead-letters a message whose guard throws, with the reason, and applies the messages after it', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-codec-guard-');
  const broker = new MemoryBroker();
  const visits = defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 1, key: (v: Visit) => v.key });
  const topology = Topology.create('guard-test').stage('count', {
    input: visits,
    columnFamilies: { visits: { mergeOperator: int64Add() } },
    // Escalate at the 3rd failure: a message that failed its batch would stop the topology.
    supervision: SupervisorStrategy.restartWithBackoff({ minMs: 1, maxMs: 10, factor: 2, randomFactor: 0 }).withLimit(2, 600_000),
    onMessage: (ctx, v) => ctx.writes.merge('visits', v.key, encodeInt64(1)),
    query: async (reads, key: string) => decodeInt64((await reads.get('visits', key)) ?? encodeInt64(0)),
  });
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  let restarts = 0;
  running.system.events$.subscribe((e) => void (e.type === '@shardflow.restarted' && restarts++));
  try {
    // Another system's producer, without the guard (the topology's own producers check it at the send).
    const unchecked = defineNamespace('visits', { codec: msgpackCodec('Visit', (v): v is Visit => true), partitions: 1, key: (v: Visit) => v.key });
    const producer = await running.producer(unchecked, 'visits-src');
    await producer.send({ key: 'a', url: 'http://a.example/1' });
    await producer.send({ key: 'a', url: 'gopher://a.example/2' });
    await producer.send({ key: 'a', url: 'https://a.example/3' });
    await running.quiescence({ timeoutMs: 60_000 });
    const dead = await running.deadLetters('count');
    assert.deepEqual(dead.map((d) => d.reason), ['Visit: url "gopher://a.example/2" is not http(s)']);
    assert.equal(await running.ask('count', 0, 'a'), 2n);
    assert.equal(restarts, 0, 'the bad message failed no batch');
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

test('an external producer runs the guard at its send: a bad value is refused there with the reason, nothing is sent', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-codec-check-');
  const visits = defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 2, key: (v: Visit) => v.key });
  const topology = Topology.create('codec-check').stage('count', {
    input: visits,
    columnFamilies: { n: { mergeOperator: int64Add() } },
    onMessage: (ctx, v) => ctx.writes.merge('n', v.key, encodeInt64(1)),
    query: async (reads, key: string) => decodeInt64((await reads.get('n', key)) ?? encodeInt64(0)),
  });
  const quiet: Logger = { debug() {}, warn() {}, error() {} };
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const producer = await running.producer(visits, 'visits-src');
    await producer.send({ key: 'a', url: 'https://a.example/' });
    await assert.rejects(producer.send({ key: 'a', url: 'ftp://a.example/' }), (err: Error) =>
      err.name === 'InvalidArgumentError' && /Visit: url "ftp:\/\/a\.example\/" is not http\(s\) \(refused at the send\)/.test(err.message));
    await assert.rejects(producer.send(JSON.parse('{"key":42}') as Visit), /Visit: value does not have the expected shape \(refused at the send\)/);
    await producer.send({ key: 'a', url: 'https://a.example/2' });
    await running.quiescence({ timeoutMs: 30_000 });
    assert.equal(await running.askKey('count', 'a', 'a'), 2n);
    assert.deepEqual(await running.deadLetters('count'), [], 'refused values never reach the broker');
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});
