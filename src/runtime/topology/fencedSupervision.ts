import { FencedError } from '../../errors.js';
import { SupervisorStrategy, type Directive } from '../supervision/strategy.js';

/**
 * `strategy` with one rule ahead of its own: a FencedError stops the partition for good. A
 * fenced-off owner must not restart (its `start()` would be refused again, and every restart
 * would count towards the restart intensity until the whole topology escalated); the worker
 * that lost the lease learns of the stop and lets the partition's new owner run it.
 * Keeps the scope, fallback, rules (in order, with their backoffs), limit, backoff and jitter
 * source of `strategy`.
 */
export function stopWhenFenced(strategy: SupervisorStrategy): SupervisorStrategy {
  return onFenced(strategy, 'stop');
}

/**
 * `strategy` with one rule ahead of its own: a FencedError gets `directive`. A partition made
 * of several actors gives its children `'escalate'` (a child that finds the lease lost fails
 * the partition itself, whose own supervisor, under {@link stopWhenFenced}, stops it with
 * every child for good) and its own supervisor `'stop'`. Keeps the scope, fallback, rules (in
 * order, with their backoffs), limit, backoff and jitter source of `strategy`.
 */
export function onFenced(strategy: SupervisorStrategy, directive: Directive): SupervisorStrategy {
  let s = SupervisorStrategy.oneForOne(strategy.fallback).withScope(strategy.scope).on(FencedError, directive);
  for (const rule of strategy.rules) s = s.on(rule.match, rule.directive, rule.backoff === undefined ? undefined : { backoff: rule.backoff });
  if (strategy.limit) s = s.withLimit(strategy.limit.maxRestarts, strategy.limit.withinMs);
  if (strategy.backoff) s = s.withBackoff(strategy.backoff);
  if (strategy.random) s = s.withRandom(strategy.random);
  return s;
}
