import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PulsarBroker } from '../src/runtime/brokers/pulsar/broker.js';
import { brokerConformance, pulsarUnavailable } from './kit/brokers.js';

const run = promisify(execFile);
const webUrl = process.env.SHARDFLOW_PULSAR_URL ?? 'http://127.0.0.1:8080';
const scripts = fileURLToPath(new URL('../scripts/pulsar/', import.meta.url));
/** A tenant of its own, so tests never touch shardflow's. */
const options = { webUrl, tenant: 'shardflow-test', connectTimeoutMs: 15_000 };

brokerConformance({
  name: 'pulsar',
  unavailable: () => pulsarUnavailable(webUrl),
  create: () => PulsarBroker.connect(options),
  async restart() {
    await run('bash', [`${scripts}stop.sh`], { timeout: 120_000 });
    await run('bash', [`${scripts}start.sh`], { timeout: 600_000 });
  },
  quietMs: 1000,
  deadlineMs: 30_000,
});
