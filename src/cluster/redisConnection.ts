import { Redis, ReplyError } from 'ioredis';
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

/**
 * Runs one command of the cluster's coordination (`what` says which, for the message): a
 * failure to get an answer (a timeout, a closed connection) becomes BrokerDisconnectedError,
 * which a worker treats as transient (it tries again) and a supervisor as an outage; a reply
 * error of the server (`ReplyError`) is thrown as it is.
 * @throws BrokerDisconnectedError when the cluster's Redis does not answer; its reply errors
 */
export async function askCoordination<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof ReplyError) throw err;
    throw new BrokerDisconnectedError(`cannot ${what}: the cluster's redis did not answer (${(err as Error).message})`, { cause: err });
  }
}
