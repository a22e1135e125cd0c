/**
 * An answer that `receive()` hands back before it is ready: the message counts as handled at
 * once and the actor takes its next message, while the asker waits for `answer` (Akka's
 * `pipeTo(sender)`: the reply of a future, with the actor free meanwhile). Made with
 * {@link detachReply}.
 *
 * What settles `answer` is the behaviour's business and runs beside its later messages: it
 * must only read what they leave consistent (a stage's queries read a store snapshot taken
 * when the query arrived). A rejection rejects the ask alone: it is not a failure of the actor
 * (nothing is restarted) and a `tell` drops it. An ask's timeout still applies.
 */
export class DetachedReply<R> {
  /** @param answer what the asker gets when it settles */
  constructor(readonly answer: Promise<R>) {}
}

/**
 * Returns `answer` from `receive()` without holding the mailbox until it settles
 * (see {@link DetachedReply}).
 * @example
 * ```ts
 * receive: (state, m) => detachReply(state.snapshotRead(m.key)), // the next message runs meanwhile
 * ```
 */
export function detachReply<R>(answer: Promise<R>): DetachedReply<R> {
  return new DetachedReply(answer);
}
