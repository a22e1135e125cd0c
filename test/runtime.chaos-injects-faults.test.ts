import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, ChaosPolicy, type Behavior } from '../src/runtime/actor/index.js';
import type { LifecycleEvent } from '../src/runtime/inspection.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingLogger, settle } from './kit/index.js';

async function runWithChaos(chaos: ChaosPolicy, messages: number) {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger(), chaos });
  const failures: unknown[] = [];
  system.events$.subscribe((event: LifecycleEvent) => {
    if (event.type === '@shardflow.failed') failures.push(event.reason);
  });
  const handled: number[] = [];
  const counter: Behavior<number, void, void> = { kind: 'counter', start: () => undefined, receive: (_s, n) => void handled.push(n) };
  const ref = system.spawn('c', counter, { supervision: SupervisorStrategy.restart });
  for (let i = 0; i < messages; i++) await ref.tell(i);
  await settle();
  await system.terminate();
  return { handled, failures };
}

test('chaos fails about rate of receive() calls with InjectedFaultError, before receive(), reproducibly per seed', async () => {
  const policy = ChaosPolicy.create({ rate: 0.1, seed: 42 });
  const first = await runWithChaos(policy, 1000);
  const second = await runWithChaos(policy, 1000);
  assert.ok(first.failures.length > 60 && first.failures.length < 140, `${first.failures.length} faults in 1000`);
  assert.ok(first.failures.every((e) => (e as { code?: string }).code === 'SF_ERR_INJECTED_FAULT'));
  assert.equal(first.handled.length + first.failures.length, 1000, 'a faulted message is not handed to receive()');
  assert.deepEqual(second.handled, first.handled, 'same seed, same faults');
  const other = await runWithChaos(policy.withSeed(43), 1000);
  assert.notDeepEqual(other.handled, first.handled);
});

test('chaos limited to kinds spares the others; rate 0 is off', async () => {
  const spared = await runWithChaos(ChaosPolicy.create({ rate: 1, kinds: ['indexer'] }), 50);
  assert.equal(spared.failures.length, 0);
  const off = await runWithChaos(ChaosPolicy.off, 50);
  assert.equal(off.handled.length, 50);
  assert.equal(ChaosPolicy.off.injector(), undefined);
});

test('ChaosPolicy.parse reads the CLI forms and rejects bad ones', () => {
  assert.equal(ChaosPolicy.parse('0.05').rate, 0.05);
  const full = ChaosPolicy.parse('rate=0.2,seed=7,kinds=indexer+metrics');
  assert.deepEqual([full.rate, full.seed, full.kinds], [0.2, 7, ['indexer', 'metrics']]);
  assert.ok(Object.isFrozen(full));
  assert.throws(() => ChaosPolicy.parse('rate=2'), { code: 'SF_ERR_INVALID_ARGUMENT' });
  assert.throws(() => ChaosPolicy.parse('speed=1'), { code: 'SF_ERR_INVALID_ARGUMENT' });
  assert.throws(() => ChaosPolicy.parse('seed=1'), { code: 'SF_ERR_INVALID_ARGUMENT' });
});
