import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  MemoryBroker, FlowCounters, StreamMarks, StreamOutbox, applyExactlyOnce, decodeInt64, encodeInt64, epochSequence,
  msgpackCodec, partitionId, producerId, sequence,
} from '../src/index.js';
import { topic } from '../src/runtime/brokers/index.js';
import { Store } from '../src/storage/index.js';
import { pull } from '../src/testing/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * The framework's applied marks and outbox in column families an application names (the web
 * index's `meta` and `outbox`, not the reserved `sf.*`): a store written in that layout before
 * (the bytes below are the documented keys and values: `applied 0x00 <consumer> 0x00
 * <producer>` and `seq 0x00 <owner> 0x00 <topic>` as int64 LE in `meta`, outbox rows keyed
 * `<owner>|<topic> 0x00 <seq as 8 bytes BE>`) is read as it is and goes on with the same keys.
 */
const families = { meta: 'meta', outbox: 'outbox' } as const;
const utf8 = (s: string) => Buffer.from(s, 'utf8');

function outboxRowKey(owner: string, topicName: string, seq: number): Buffer {
  const s = Buffer.alloc(8);
  s.writeBigUInt64BE(BigInt(seq));
  return Buffer.concat([utf8(`${owner}|${topicName}`), Buffer.of(0), s]);
}

/** Runs `body` with a store of families `meta`, `outbox` and `pages` (none reserved) and a memory broker, then closes both. */
async function withStore(body: (store: Store, broker: MemoryBroker) => Promise<void>): Promise<void> {
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const store = await Store.open({ path: join(dir, 'p3'), columnFamilies: { meta: {}, outbox: {}, pages: {} } });
  try {
    await body(store, broker);
  } finally {
    await store.close();
    await broker.close();
    cleanup();
  }
}

test('marks and outbox rows written in the named families are read and continued with the same keys', () => withStore(async (store, broker) => {
  const links3 = topic('links', partitionId(3));
  const loader = producerId('loader/a');
  // What an earlier run left: a mark at 5, next outbox sequence 7, one row (6) not published.
  const before = store.batch();
  before.put('meta', utf8('applied\u0000indexer\u0000loader/a'), encodeInt64(5));
  before.put('meta', utf8('seq\u0000indexer\u0000links/3'), encodeInt64(7));
  before.put('outbox', outboxRowKey('indexer', 'links/3', 6), utf8('left over'));
  await store.write(before);

  const marks = new StreamMarks(store, 'indexer', families);
  assert.equal(await marks.mark(loader), 5);
  assert.deepEqual(await marks.classify(loader, sequence(5)), { kind: 'applied' });
  assert.deepEqual(await marks.classify(loader, sequence(6)), { kind: 'new' });

  const consumer = await broker.subscribe(links3, { subscription: 'backlinks', type: 'failover' });
  const counters = new FlowCounters();
  const outbox = await StreamOutbox.open({ store, broker, owner: 'indexer', producer: producerId('indexer@3'), counters, columnFamilies: families });
  const [replayed] = await pull(consumer, 1, 10_000);
  assert.equal(replayed?.sequence, 6);
  assert.equal(replayed?.producer, 'indexer@3');
  assert.equal(Buffer.from(replayed!.payload).toString(), 'left over');
  await consumer.ack(replayed!);

  const batch = store.batch();
  assert.equal(await outbox.enqueue(batch, links3, utf8('next')), 7);
  marks.record(batch, loader, sequence(9));
  await store.write(batch);
  await outbox.publish();
  const [next] = await pull(consumer, 1, 10_000);
  assert.equal(next?.sequence, 7);

  // Same keys, same values, in the named families; nothing left in the outbox.
  assert.equal(decodeInt64((await store.get('meta', utf8('seq\u0000indexer\u0000links/3')))!), 8n);
  assert.equal(decodeInt64((await store.get('meta', utf8('applied\u0000indexer\u0000loader/a')))!), 9n);
  const rows: Buffer[] = [];
  for await (const [key] of store.iterate('outbox', { keysOnly: true })) rows.push(key);
  assert.deepEqual(rows, []);
  await outbox.close();
  await consumer.close();
}));

test('applyExactlyOnce skips applied messages, dead-letters undecodable and fenced-off ones with their reasons', () => withStore(async (store, broker) => {
  const pages = topic('pages-in', partitionId(0));
  const isPage = (v: unknown): v is { url: string } => typeof (v as { url?: unknown })?.url === 'string';
  const codec = msgpackCodec('Page', isPage);
  const ext = producerId('ext');
  const seed = store.batch();
  seed.put('meta', utf8('applied\u0000reader\u0000ext'), encodeInt64(epochSequence(2, 1))); // epoch 2 applied up to n = 1
  await store.write(seed);

  const consumer = await broker.subscribe(pages, { subscription: 'reader', type: 'failover' });
  const producer = await broker.producer(pages, { producer: ext });
  await producer.send(codec.encode({ url: 'http://a.test/' }), { sequence: epochSequence(2, 1) }); // applied before
  await producer.send(codec.encode({ url: 'http://b.test/' }), { sequence: epochSequence(2, 2) }); // new
  await producer.send(utf8('not msgpack of a page'), { sequence: epochSequence(2, 3) }); // undecodable
  await producer.send(codec.encode({ url: 'http://c.test/' }), { sequence: epochSequence(1, 9) }); // older incarnation
  const messages = await pull(consumer, 4, 10_000);
  assert.equal(messages.length, 4);

  const marks = new StreamMarks(store, 'reader', families);
  const counters = new FlowCounters();
  const applied = await applyExactlyOnce({ store, marks, counters, namespace: 'pages-in' }, { consumer, messages }, codec, (batch, page) => {
    batch.put('pages', page.url, utf8('seen'));
  });
  assert.deepEqual(applied, [{ url: 'http://b.test/' }]);
  assert.deepEqual((await store.get('pages', 'http://b.test/'))?.toString(), 'seen');
  assert.equal(await store.get('pages', 'http://a.test/'), undefined);
  assert.equal(decodeInt64((await store.get('meta', utf8('applied\u0000reader\u0000ext')))!), BigInt(epochSequence(2, 3)));
  const dead = await broker.deadLetters(pages, 'reader');
  assert.deepEqual(dead.map((d) => d.message.sequence).sort(), [epochSequence(1, 9), epochSequence(2, 3)].sort());
  assert.match(dead.find((d) => d.message.sequence === epochSequence(1, 9))!.reason, /epoch 1 .* older than its epoch 2/);
  await producer.close();
  await consumer.close();
}));
