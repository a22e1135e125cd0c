import WebSocket from 'ws';
import { BrokerDisconnectedError, InvalidArgumentError } from '../../../errors.js';

/**
 * Opens a WebSocket to Pulsar's WebSocket API and waits until it is open.
 *
 * `onMessage` is registered on the socket before it opens, and must be: the consumer and
 * reader endpoints start pushing messages as soon as the upgrade completes, so frames often
 * travel in the same TCP segment as the `101 Switching Protocols` answer. `ws` hands those
 * bytes (the upgrade's `head`) to its receiver on the next tick and emits them as 'message'
 * events before the promise returned here resolves; a listener attached after `await
 * openSocket(...)` misses them. Pulsar then counts them as delivered to this consumer (they
 * are not redelivered while it stays connected, and they use up the proxy's
 * `receiverQueueSize` window).
 *
 * Pulsar refuses a producer or consumer during the HTTP upgrade: 409 (an exclusive
 * subscription already has a consumer), 400 (bad query parameter), 500 with the broker's
 * reason (e.g. a subscription of another type).
 * @throws InvalidArgumentError on 400, 409 and "different type" refusals;
 *   BrokerDisconnectedError when unreachable, on other refusals or after `timeoutMs`.
 */
export function openSocket(url: string, timeoutMs: number, onMessage?: (data: WebSocket.RawData) => void): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    if (onMessage) ws.on('message', onMessage);
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      ws.terminate();
      reject(err);
    };
    ws.once('open', () => {
      settled = true;
      resolve(ws);
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const why = `${status} ${res.statusMessage ?? ''} ${body.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 300)}`;
        const refused = status === 400 || status === 409 || /different type|already connected|exclusive/i.test(why);
        fail(refused ? new InvalidArgumentError(`pulsar refused ${redact(url)}: ${why}`) : new BrokerDisconnectedError(`pulsar refused ${redact(url)}: ${why}`));
      });
      res.on('error', (err) => fail(new BrokerDisconnectedError(`pulsar ${redact(url)}: ${err.message}`, { cause: err })));
    });
    ws.once('error', (err) => fail(new BrokerDisconnectedError(`pulsar ${redact(url)}: ${err.message}`, { cause: err })));
  });
}

/** The URL without its query (tokens never reach messages). */
function redact(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}
