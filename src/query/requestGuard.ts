import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * Request hygiene of the query API, before any route runs: the `Host` header, the request
 * target's form, length and percent-escapes, and the absence of a body. Every refusal is an
 * {@link ErrorBody}, the one error shape of docs/query-api.md.
 */

/** Error answer of every route and every refusal: `error` is a stable code, `reason` says what to fix. */
export interface ErrorBody {
  readonly error: 'invalid_url' | 'invalid_request' | 'forbidden' | 'not_found' | 'method_not_allowed' | 'not_implemented' | 'unauthorized' | 'unavailable' | 'internal';
  readonly reason: string;
  readonly detail?: unknown;
}

/** A refusal: HTTP status and the body to send. */
export interface Refusal {
  readonly status: number;
  readonly body: ErrorBody;
}

/**
 * Longest request target (path and query) answered, in characters: 8 KiB, the request-line
 * limit of common servers (nginx `large_client_header_buffers 8k`, Apache `LimitRequestLine 8190`).
 * Longer targets get 414. Node refuses a request whose line and headers pass `http.maxHeaderSize`
 * (16 KiB by default) before any route runs: 431, answered by {@link clientErrorAnswer}.
 */
export const MAX_REQUEST_TARGET = 8192;

/** Builds an {@link ErrorBody}. */
export function errorBody(error: ErrorBody['error'], reason: string, detail?: unknown): ErrorBody {
  return { error, reason, ...(detail !== undefined ? { detail } : {}) };
}

/**
 * Checks what every request must satisfy, in this order:
 *
 * 1. `Host` names a host the server answers to (`hostRefusal`, see `hostHeaderCheck`): else 403 `forbidden`;
 * 2. the target is a path (origin form, `/...`), not `http://host/...` nor `*`: else 400 `invalid_request`;
 * 3. the target is at most {@link MAX_REQUEST_TARGET} characters: else 414 `invalid_request`;
 * 4. every `%` of the query string starts an escape of two hex digits that decodes as UTF-8:
 *    else 400 `invalid_request` (the router refuses bad escapes in the path, see `frameworkErrors`);
 * 5. there is no body (`Content-Length` > 0 or any `Transfer-Encoding`): else 400 `invalid_request`.
 *
 * @param target the raw request target (`req.raw.url`)
 * @returns the refusal, or `undefined` when the request may go on
 */
export function guardRequest(target: string, headers: IncomingHttpHeaders, hostRefusal: (host: string | undefined) => string | undefined): Refusal | undefined {
  const host = hostRefusal(headers.host);
  if (host !== undefined) return { status: 403, body: errorBody('forbidden', host) };
  if (!target.startsWith('/')) return { status: 400, body: errorBody('invalid_request', `the request target must be a path starting with "/", got ${JSON.stringify(clip(target))}`) };
  if (target.length > MAX_REQUEST_TARGET) return { status: 414, body: errorBody('invalid_request', `the request target has ${target.length} characters, more than ${MAX_REQUEST_TARGET}`) };
  const q = target.indexOf('?');
  if (q >= 0) {
    for (const part of target.slice(q + 1).split('&')) {
      try {
        decodeURIComponent(part.replace(/\+/g, ' '));
      } catch {
        return { status: 400, body: errorBody('invalid_request', `malformed percent-escape in query string: ${JSON.stringify(clip(part))} (a "%" must start %XX of valid UTF-8; write a literal "%" as %25)`) };
      }
    }
  }
  const length = headers['content-length'];
  if ((length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined) {
    return { status: 400, body: errorBody('invalid_request', 'the query API takes no request body: send parameters in the query string') };
  }
  return undefined;
}

/**
 * The answer to a framework error (fastify's `frameworkErrors` option): a path whose
 * percent-escapes do not decode (`FST_ERR_BAD_URL`), a path parameter over the router's limit
 * (`FST_ERR_MAX_PARAM_LENGTH`), anything else the router refuses.
 */
export function frameworkErrorAnswer(error: { code?: string; message: string }, target: string): Refusal {
  if (error.code === 'FST_ERR_BAD_URL') return { status: 400, body: errorBody('invalid_request', `malformed percent-escape in path: ${JSON.stringify(clip(target.split('?')[0] ?? ''))} (a "%" must start %XX of valid UTF-8; write a literal "%" as %25)`) };
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') return { status: 414, body: errorBody('invalid_request', `a path segment of ${JSON.stringify(clip(target.split('?')[0] ?? ''))} is too long`) };
  return { status: 400, body: errorBody('invalid_request', error.message) };
}

/**
 * Fastify's `clientErrorHandler`: requests Node's HTTP parser refuses before fastify sees them
 * (malformed request line or headers, line and headers over `http.maxHeaderSize`, the request
 * not received within `requestTimeout`) are answered in the {@link ErrorBody} shape, then the
 * connection is closed (as Node's own handler does). Connections already reset get nothing.
 */
export function clientErrorAnswer(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  let status = 400;
  let reason = `malformed HTTP request (${error.code ?? error.message})`;
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    reason = `the request line and headers exceed ${maxHeaderSize} bytes`;
  } else if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    reason = 'the request was not received in time';
  }
  const body = JSON.stringify(errorBody('invalid_request', reason));
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(error);
}

/** The first 200 characters of `s`, with `...` when cut (reasons stay short). */
function clip(s: string): string {
  return s.length > 200 ? `${s.slice(0, 200)}...` : s;
}
