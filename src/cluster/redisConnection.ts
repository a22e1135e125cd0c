import { Redis } from 'ioredis';
import { BrokerDisconnectedError } from '../errors.js';
import { defineClusterScripts } from './scripts.js';

/**
 * Connects to the Redis that coordinates a cluster (`redis://host:port[/db]`), checks it with
 * PING and registers the cluster scripts. Commands time out after `commandTimeoutMs` (a
 * heartbeat must not wait on a dead server past its lease; ioredis `commandTimeout`).
 * @throws BrokerDisconnectedError when Redis does not answer within `connectTimeoutMs`
 */
export async function connectCoordination(url: string, connectTimeoutMs: number, commandTimeoutMs?: number): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: connectTimeoutMs,
    ...(commandTimeoutMs ? { commandTimeout: commandTimeoutMs } : {}),
  });
  redis.on('error', () => {}); // reported by the commands that fail; ioredis reconnects meanwhile
  defineClusterScripts(redis);
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.connect().then(() => redis.ping()),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${connectTimeoutMs} ms`)), connectTimeoutMs);
      }),
    ]);
  } catch (err) {
    redis.disconnect();
    throw new BrokerDisconnectedError(`cannot reach the cluster's redis at ${url}: ${(err as Error).message}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
  return redis;
}
