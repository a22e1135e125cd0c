import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import WebSocket from 'ws';
import { PulsarBroker } from '../src/runtime/brokers/pulsar/broker.js';
import type { Topic } from '../src/runtime/topics.js';
import { brokerConformance, pulsarUnavailable, type ForeignEntry } from './kit/brokers.js';

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
