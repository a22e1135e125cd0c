import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import WebSocket from 'ws';
import { PulsarBroker } from '../src/runtime/brokers/pulsar/broker.js';
import type { Topic } from '../src/runtime/topics.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { topic } from '../src/runtime/topics.js';
import { partitionId, producerId } from '../src/runtime/ids.js';
import type { BrokerMessage } from '../src/runtime/brokers/broker.js';
import { brokerConformance, pulsarUnavailable, skipWithoutPulsar, type ForeignEntry } from './kit/brokers.js';

const run = promisify(execFile);
const webUrl = process.env.SHARDFLOW_PULSAR_URL ?? 'http://127.0.0.1:8080';
const scripts = fileURLToPath(new URL('../scripts/pulsar/', import.meta.url));
const tenant = 'shardflow-test';
const maxPayloadBytes = 64 * 1024;
/** A tenant of its own, so tests never touch shardflow's. */
const options = { webUrl, tenant, connectTimeoutMs: 15_000, maxPayloadBytes, dataLossCheckMs: 1000 };

/** `persistent/<tenant>/<namespace>/<partition>`, as the WebSocket and admin paths name it. */
function path(t: Topic): string {
  return ['persistent', tenant, t.namespace, String(t.partition)].map(encodeURIComponent).join('/');
}

/**
 * A produce through Pulsar's WebSocket producer API that is not ours: only the given
 * properties (`sf-producer`, `sf-sequence`), the payload as given.
 */
async function injectForeign(t: Topic, entry: ForeignEntry): Promise<void> {
  const ns = await fetch(`${webUrl}/admin/v2/namespaces/${tenant}/${encodeURIComponent(t.namespace)}`, { method: 'PUT' });
  if (!ns.ok && ns.status !== 409) throw new Error(`namespace: ${ns.status} ${await ns.text()}`);
  const properties: Record<string, string> = {};
  if (entry.producer !== undefined) properties['sf-producer'] = entry.producer;
  if (entry.sequence !== undefined) properties['sf-sequence'] = entry.sequence;
  const ws = new WebSocket(`${webUrl.replace(/^http/, 'ws')}/ws/v2/producer/${path(t)}?batchingEnabled=false`);
  try {
    await new Promise<void>((resolve, reject) => {
      ws.once('error', reject);
      ws.once('open', () => {
        ws.once('message', (data) => {
          const receipt = JSON.parse(String(data)) as { result: string; errorMsg?: string };
          if (receipt.result === 'ok') resolve();
          else reject(new Error(`foreign produce refused: ${receipt.result} ${receipt.errorMsg ?? ''}`));
        });
        ws.send(JSON.stringify({ payload: Buffer.from(entry.payload ?? new Uint8Array(0)).toString('base64'), properties, context: '1' }));
      });
    });
  } finally {
    ws.close();
  }
}

brokerConformance({
  name: 'pulsar',
  unavailable: () => pulsarUnavailable(webUrl),
  create: () => PulsarBroker.connect(options),
  maxPayloadBytes,
  injectForeign,
  async loseData(t) {
    const res = await fetch(`${webUrl}/admin/v2/${path(t)}?force=true`, { method: 'DELETE' });
    if (!res.ok) throw new Error(`delete topic: ${res.status} ${await res.text()}`);
  },
  async restart() {
    await run('bash', [`${scripts}stop.sh`], { timeout: 120_000 });
    await run('bash', [`${scripts}start.sh`], { timeout: 600_000 });
  },
  quietMs: 1000,
  deadlineMs: 30_000,
});

// Found by a new user: a worker SIGSTOPped past its lease kept its WebSocket consumer open, so
// Pulsar kept the failover subscription on it and the partition's next owner got nothing for
// as long as the worker stayed stopped. A next owner subscribes with its lease epoch as the
// priority (SubscribeOptions.priority): the broker makes it the active consumer at once and
// delivers the old one's unacked messages to it again.
test('pulsar failover: a consumer of a higher priority is the active one at once while an older one stays connected and acks nothing', { timeout: 120_000 }, async (t) => {
  if (!(await skipWithoutPulsar(t))) return;
  const broker = await PulsarBroker.connect(options);
  try {
    const tp = topic(`priority-${process.pid}-${Date.now()}`, partitionId(0));
    const producer = await broker.producer(tp, { producer: producerId('prio') });
    const send = async (from: number, to: number) => {
      for (let i = from; i < to; i++) await producer.send(Buffer.from(`m${i}`));
    };
    const paused = await broker.subscribe(tp, { subscription: 'stage', type: 'failover', priority: 1, receiverQueueSize: 10 });
    await send(0, 3);
    const first: BrokerMessage[] = [];
    for (const deadline = Date.now() + 20_000; first.length < 3 && Date.now() < deadline; ) first.push(...(await paused.receive(3 - first.length, 1000)));
    assert.equal(first.length, 3, 'the first owner got the first messages (and acks none: it is paused)');
    const next = await broker.subscribe(tp, { subscription: 'stage', type: 'failover', priority: 2, receiverQueueSize: 10 });
    await send(3, 6);
    const got: string[] = [];
    for (const deadline = Date.now() + 30_000; new Set(got).size < 6 && Date.now() < deadline; ) {
      for (const m of await next.receive(10, 1000)) {
        got.push(Buffer.from(m.payload).toString());
        await next.ack(m);
      }
    }
    assert.deepEqual([...new Set(got)].sort(), ['m0', 'm1', 'm2', 'm3', 'm4', 'm5'], 'the next owner gets every message, the unacked ones again');
    await paused.close();
    await next.close();
    await producer.close();
  } finally {
    await broker.close();
  }
});

// Found by a new user: Pulsar's WebSocket proxy takes frames of at most 1 MiB
// (`webSocketMaxTextFrameSize`), and a send travels as base64 inside JSON, so a payload over
// about 768 KiB closed the producer's connection; the send failed as a disconnect and was
// tried again forever (a crawl refetched a 2.5 MB page 1,756 times). The default payload limit
// now fits the frames, a larger send is refused as too large with nothing sent, and a dead
// letter whose payload cannot fit one frame keeps its reason without the payload.
test('pulsar: a payload over what a WebSocket frame takes is refused as too large; the producer goes on', { timeout: 120_000 }, async (t) => {
  if (!(await skipWithoutPulsar(t))) return;
  const broker = await PulsarBroker.connect({ webUrl, tenant, connectTimeoutMs: 15_000 });
  try {
    assert.equal(broker.maxPayloadBytes, 784_896, "Pulsar's 1 MiB frames, less base64 and the JSON around it");
    const tp = topic(`frames-${Date.now()}`, partitionId(0));
    const c = await broker.subscribe(tp, { subscription: 's', type: 'exclusive' });
    const p = await broker.producer(tp, { producer: producerId('frames') });
    await assert.rejects(p.send(new Uint8Array(900_000)), (err: Error & { code?: string; limit?: number }) => err.code === 'SF_ERR_PAYLOAD_TOO_LARGE' && err.limit === 784_896);
    const big = randomBytes(784_896);
    await p.send(big);
    const got = await c.receive(1, 30_000);
    assert.equal(got.length, 1);
    assert.ok(Buffer.from(got[0]!.payload).equals(big), 'the largest payload arrives whole');
    await c.ack(got[0]!);
    await p.close();
    await c.close();
  } finally {
    await broker.close();
  }
  await assert.rejects(PulsarBroker.connect({ webUrl, tenant, maxPayloadBytes: 5 * 1024 * 1024 }), /does not fit Pulsar's WebSocket frames of maxFrameBytes 1048576/);
});

test('pulsar: a malformed message too large for a dead-letter frame is dead-lettered without its payload, its reason saying so', { timeout: 120_000 }, async (t) => {
  if (!(await skipWithoutPulsar(t))) return;
  const broker = await PulsarBroker.connect({ webUrl, tenant, connectTimeoutMs: 15_000, maxPayloadBytes: 32 * 1024, maxFrameBytes: 96 * 1024 });
  try {
    const tp = topic(`frames-dl-${Date.now()}`, partitionId(0));
    const c = await broker.subscribe(tp, { subscription: 's', type: 'exclusive' });
    await injectForeign(tp, { producer: 'foreign', sequence: '1', payload: new Uint8Array(200_000) });
    let dead: Awaited<ReturnType<typeof broker.deadLetters>> = [];
    for (let i = 0; i < 100 && dead.length === 0; i++) {
      dead = await broker.deadLetters(tp, 's');
      if (dead.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(dead.length, 1);
    assert.match(dead[0]!.reason, /payload of 200000 bytes.*its payload of 200000 bytes was not kept: .*exceeds maxFrameBytes 98304/);
    assert.equal(dead[0]!.message.payload.byteLength, 0);
    await c.close();
  } finally {
    await broker.close();
  }
});
