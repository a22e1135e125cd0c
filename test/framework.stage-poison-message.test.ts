import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ActorStoppedError, MemoryBroker, SupervisorStrategy, Topology, decodeInt64, defineNamespace, encodeInt64, int64Add, msgpackCodec,
} from '../src/index.js';
import { recordingLogger } from './kit/recordingLogger.js';
import { tempDir } from './kit/datasets.js';

/**
 * A handler that always fails on one message (a bug, not bad input) must not restart its stage
 * forever in silence, as a first user found: each failure is logged where it happened, the
 * partition's restart intensity escalates to the stage's supervisor, which escalates to the
 * root, and the topology stops saying why (`quiescence()` throws ActorStoppedError naming the
 * handler's error) instead of polling until its timeout.
 */
interface Txn { readonly card: string; readonly cents: number }
const isTxn = (v: unknown): v is Txn => typeof (v as Txn)?.card === 'string' && Number.isInteger((v as Txn)?.cents);

test('with maxAttempts Infinity, a handler that always throws on one message stops the topology with its error, logged', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-escalation-');
  const txns = defineNamespace('txns', { codec: msgpackCodec('Txn', isTxn), partitions: 4, key: (t: Txn) => t.card });
  const topology = Topology.create('poison').stage('cards', {
    input: txns,
    columnFamilies: { total: { mergeOperator: int64Add() } },
    supervision: SupervisorStrategy.restartWithBackoff({ minMs: 1, maxMs: 5, factor: 2, randomFactor: 0 }).withLimit(3, 60_000),
    maxAttempts: Infinity, // never give the message up: the restart intensity decides
    onMessage(ctx, t) {
      if (t.card === 'poison') throw new Error('cannot handle txn poison (a bug in the handler)');
      ctx.writes.merge('total', t.card, encodeInt64(t.cents));
    },
  });
  const logger = recordingLogger();
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger });
  try {
    const producer = await running.producer(txns, 'txns-src');
    for (let i = 0; i < 50; i++) await producer.send({ card: `card-${i % 7}`, cents: 100 + i });
    await producer.send({ card: 'poison', cents: 1 });
    const err = await running.quiescence({ timeoutMs: 60_000 }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof ActorStoppedError, `quiescence ends with ActorStoppedError, not ${String(err)}`);
    assert.match(err.message, /cannot handle txn poison/, 'the error names the handler failure that escalated');
    const failures = logger.entries.filter((e) => e.level === 'warn' && /actor failed/.test(e.message ?? ''));
    assert.ok(failures.length >= 4, `each failure of the partition is logged (${failures.length} warnings)`);
    assert.match(JSON.stringify((failures[0]!.fields as { path: string }).path), /\/cards\/p\d/);
    await assert.rejects(running.ask('cards', 0, undefined as never), ActorStoppedError);
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

test('a poison message is found, tried maxAttempts times alone, then dead-lettered with its error; every other message applied once', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-poison-');
  const txns = defineNamespace('txns', { codec: msgpackCodec('Txn', isTxn), partitions: 2, key: (t: Txn) => t.card });
  const topology = Topology.create('poison-dlq').stage('cards', {
    input: txns,
    columnFamilies: { total: { mergeOperator: int64Add() } },
    supervision: SupervisorStrategy.restartWithBackoff({ minMs: 1, maxMs: 5, factor: 2, randomFactor: 0 }),
    maxAttempts: 3,
    batching: { maxCount: 64, maxDelayMs: 20 },
    onMessage(ctx, t) {
      if (t.card === 'poison') throw new Error('cannot handle txn poison (a bug in the handler)');
      ctx.writes.merge('total', t.card, encodeInt64(t.cents));
    },
    query: async (reads, card: string) => decodeInt64((await reads.get('total', card)) ?? encodeInt64(0)),
  });
  const logger = recordingLogger();
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger });
  try {
    const producer = await running.producer(txns, 'txns-src');
    const expected = new Map<string, bigint>();
    for (let i = 0; i < 300; i++) {
      if (i === 150) await producer.send({ card: 'poison', cents: 1 });
      const t = { card: `card-${i % 7}`, cents: 100 + i };
      await producer.send(t);
      expected.set(t.card, (expected.get(t.card) ?? 0n) + BigInt(t.cents));
    }
    await running.quiescence({ timeoutMs: 60_000 });
    const dead = await running.deadLetters('cards');
    assert.equal(dead.length, 1);
    assert.match(dead[0]!.reason, /^the stage's handlers \(onMessage, onBatch\) failed on this message 3 times alone \(maxAttempts 3\); last error: Error: cannot handle txn poison/);
    for (const [card, total] of expected) assert.equal(await running.askKey('cards', card, card), total, card);
    const failures = logger.entries.filter((e) => e.level === 'warn' && /actor failed/.test(e.message ?? ''));
    assert.equal(failures.length, 4, 'the batch, then three tries alone');
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});
