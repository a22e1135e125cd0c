import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BrokerDisconnectedError, InjectedFaultError, ShardflowError } from '../src/errors.js';
import { SupervisorStrategy, seededRandom } from '../src/runtime/supervision/index.js';

test('strategies are frozen values; builders copy', () => {
  const base = SupervisorStrategy.oneForOne();
  const limited = base.withLimit(3, 1000);
  assert.ok(Object.isFrozen(base));
  assert.ok(Object.isFrozen(base.rules));
  assert.equal(base.limit, undefined);
  assert.deepEqual(limited.limit, { maxRestarts: 3, withinMs: 1000 });
  assert.notEqual(base, limited);
  assert.equal(limited.withScope('one-for-all').scope, 'one-for-all');
  assert.equal(limited.scope, 'one-for-one');
  assert.equal(limited.withoutLimit().limit, undefined);
  assert.deepEqual(SupervisorStrategy.default.limit, { maxRestarts: 3, withinMs: 5000 });
});

test('decider: first matching rule by class or code wins, else the fallback', () => {
  const strategy = SupervisorStrategy.oneForOne('escalate')
    .on('SF_ERR_STORE_CORRUPTION', 'stop')
    .on(BrokerDisconnectedError, 'restart', { backoff: { minMs: 100, maxMs: 1000 } })
    .on(ShardflowError, 'resume');
  assert.equal(strategy.decide(Object.assign(new Error('x'), { code: 'SF_ERR_STORE_CORRUPTION' })).directive, 'stop');
  const broker = strategy.decide(new BrokerDisconnectedError());
  assert.equal(broker.directive, 'restart');
  assert.deepEqual(broker.backoff, { minMs: 100, maxMs: 1000, factor: 2, randomFactor: 0.2, resetAfterMs: 100 });
  assert.equal(strategy.decide(new InjectedFaultError()).directive, 'resume');
  assert.equal(strategy.decide(new TypeError('bug')).directive, 'escalate');
  assert.equal(strategy.decide('not even an error').directive, 'escalate');
});

test('builders validate their arguments', () => {
  const s = SupervisorStrategy.oneForOne();
  assert.throws(() => s.withLimit(-1, 1000), { code: 'SF_ERR_INVALID_ARGUMENT' });
  assert.throws(() => s.withLimit(1, 0), { code: 'SF_ERR_INVALID_ARGUMENT' });
  assert.throws(() => s.withBackoff({ minMs: 10, maxMs: 5 }), { code: 'SF_ERR_INVALID_ARGUMENT' });
  assert.throws(() => s.withBackoff({ minMs: 10, maxMs: 50, factor: 0.5 }), { code: 'SF_ERR_INVALID_ARGUMENT' });
  assert.throws(() => s.on('X', 'retry' as never), { code: 'SF_ERR_INVALID_ARGUMENT' });
});

test('seededRandom is deterministic and uniform-ish in [0, 1)', () => {
  const a = seededRandom(42);
  const b = seededRandom(42);
  const xs = Array.from({ length: 1000 }, () => a());
  assert.deepEqual(xs.slice(0, 5), Array.from({ length: 5 }, () => b()));
  assert.ok(xs.every((x) => x >= 0 && x < 1));
  const mean = xs.reduce((sum, x) => sum + x, 0) / xs.length;
  assert.ok(Math.abs(mean - 0.5) < 0.05, `mean ${mean}`);
});
