/**
 * Every error shardflow throws, in one place (after undici's `lib/core/errors.js`).
 *
 * Match on `code` (stable `SF_ERR_*` strings), not on class identity: `isShardflowError`
 * works across duplicate copies of the package because the brand is a `Symbol.for` key.
 * docs/errors.md lists the codes.
 */

const kShardflowError = Symbol.for('shardflow.error');

/** Base class: `name`, a default message and a stable `code`. `cause` is kept when given. */
export class ShardflowError extends Error {
  readonly code: string = 'SF_ERR_UNKNOWN';
  readonly [kShardflowError] = true;
  constructor(message?: string, options?: { cause?: unknown }) {
    super(message ?? 'shardflow error', options);
    this.name = 'ShardflowError';
  }
}

/** True for any shardflow error, even one made by another copy of this package. */
export function isShardflowError(err: unknown): err is ShardflowError {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[kShardflowError] === true;
}

/** An argument or option is outside its documented domain. */
export class InvalidArgumentError extends ShardflowError {
  override readonly code: string = 'SF_ERR_INVALID_ARGUMENT';
  constructor(message = 'invalid argument', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InvalidArgumentError';
  }
}

/** A URL did not parse or has a scheme the crawler does not fetch. */
export class InvalidUrlError extends ShardflowError {
  override readonly code: string = 'SF_ERR_INVALID_URL';
  constructor(readonly url: string, reason = 'invalid URL', options?: { cause?: unknown }) {
    super(`${reason}: ${JSON.stringify(url)}`, options);
    this.name = 'InvalidUrlError';
  }
}

/** A message on the broker could not be decoded by the codec. */
export class UndecodableMessageError extends ShardflowError {
  override readonly code: string = 'SF_ERR_UNDECODABLE_MESSAGE';
  constructor(message = 'message does not decode', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UndecodableMessageError';
  }
}

/** The broker connection is lost; supervisors back off and restart on this one. */
export class BrokerDisconnectedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_BROKER_DISCONNECTED';
  constructor(message = 'broker disconnected', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BrokerDisconnectedError';
  }
}

/** An operation used a producer, consumer or broker after `close()`. */
export class BrokerClosedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_BROKER_CLOSED';
  constructor(message = 'broker or client is closed', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BrokerClosedError';
  }
}

/** `ask` got no reply in time. */
export class AskTimeoutError extends ShardflowError {
  override readonly code: string = 'SF_ERR_ASK_TIMEOUT';
  constructor(message = 'ask timed out', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AskTimeoutError';
  }
}

/** A message was sent to an actor that has stopped. */
export class ActorStoppedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_ACTOR_STOPPED';
  constructor(message = 'actor is stopped', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ActorStoppedError';
  }
}

/** A fault injected on purpose (`--chaos`, tests): supervisors restart on it. */
export class InjectedFaultError extends ShardflowError {
  override readonly code: string = 'SF_ERR_INJECTED_FAULT';
  constructor(message = 'injected fault', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InjectedFaultError';
  }
}

/** A bounded mailbox is full and its overflow policy is `'fail'` (or `'drop-newest'` for an `ask`). */
export class MailboxFullError extends ShardflowError {
  override readonly code: string = 'SF_ERR_MAILBOX_FULL';
  constructor(message = 'mailbox is full', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MailboxFullError';
  }
}

/**
 * A child failed more often than its supervisor strategy's restart limit allows
 * (`maxRestarts` within `withinMs`); the failure is escalated with this error, the last
 * failure as `cause`.
 */
export class RestartIntensityExceededError extends ShardflowError {
  override readonly code: string = 'SF_ERR_RESTART_INTENSITY';
  constructor(readonly path: string, message = 'restart intensity exceeded', options?: { cause?: unknown }) {
    super(`${path}: ${message}`, options);
    this.name = 'RestartIntensityExceededError';
  }
}
