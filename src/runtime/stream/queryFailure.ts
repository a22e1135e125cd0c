import type { ActorRef } from '../actor/ref.js';
import type { Clock } from '../clock.js';
import { askWithRetry, type AskRetryOptions } from '../topology/askWithRetry.js';
import type { StageMessage } from './stageActor.js';

/**
 * What a stage partition answers when its `query` hook threw (or it has none): the error
 * travels back as a value, so that a failed query (which changed nothing) neither restarts the
 * partition nor is tried again by `askWithRetry`; {@link askStageQuery} throws it at the asker.
 */
export class QueryFailure {
  constructor(readonly error: unknown) {}
}

/**
 * Asks a stage partition's `query` hook (`askWithRetry`: a restart in progress or a timeout
 * is tried again; the hook's own error is not).
 * @returns the hook's answer
 * @throws the hook's error as it threw it; the last try's error after the retries
 */
export async function askStageQuery(ref: () => ActorRef<StageMessage, unknown>, request: unknown, clock: Clock, options?: AskRetryOptions): Promise<unknown> {
  const answer = await askWithRetry(ref, { type: 'query', request }, clock, options);
  if (answer instanceof QueryFailure) throw answer.error;
  return answer;
}
