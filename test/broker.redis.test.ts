import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { RedisStreamsBroker } from '../src/runtime/brokers/redis-streams.js';
import { brokerConformance } from './kit/brokers.js';

const run = promisify(execFile);
const url = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';
const scripts = fileURLToPath(new URL('../scripts/redis/', import.meta.url));
/** Keys of this run only, so that cleanup never touches anything else on the server. */
const prefix = `sftest-${process.pid}:`;
const options = { url, prefix, heartbeatMs: 100, deadAfterMs: 1500, blockMs: 100, connectTimeoutMs: 2000 };

brokerConformance({
  name: 'redis',
  async unavailable() {
    try {
      const b = await RedisStreamsBroker.connect(options);
      await b.close();
      return undefined;
    } catch (err) {
      return `${(err as Error).message} (start it with scripts/redis/start.sh)`;
    }
  },
  create: () => RedisStreamsBroker.connect(options),
  async restart() {
    await run('bash', [`${scripts}stop.sh`]);
    await run('bash', [`${scripts}start.sh`]);
  },
  async cleanup() {
    const r = new Redis(url);
    try {
      let cursor = '0';
      do {
        const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await r.del(...keys);
      } while (cursor !== '0');
    } finally {
      r.disconnect();
    }
  },
});
