import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, type ActorRef } from '../src/runtime/actor/index.js';
import { SupervisorStrategy, seededRandom } from '../src/runtime/supervision/index.js';
import { backoffDelay } from '../src/runtime/supervision/internal/backoffDelay.js';
import { DEFAULT_STAGE_SUPERVISION } from '../src/runtime/topology/running.js';
import { BrokerDisconnectedError, ProducerFailedError } from '../src/errors.js';
import { ManualClock, recordingBehavior, recordingLogger, settle, type Recording } from './kit/index.js';

test('backoff delays follow min * factor^n capped at max (no jitter), and messages wait in the mailbox', async () => {
  const clock = new ManualClock();
  const journal: string[] = [];
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  const strategy = SupervisorStrategy.restartWithBackoff({ minMs: 100, maxMs: 1000, factor: 3, randomFactor: 0, resetAfterMs: 60_000 });
  const ref: ActorRef<Recording, string> = system.spawn('a', recordingBehavior('a', journal), { supervision: strategy });
  await settle();
  const observed: number[] = [];
  // Failures in a row, each before the new incarnation handled anything (a dependency down).
  for (let i = 0; i < 5; i++) {
    await ref.tell({ op: 'throw', error: new Error(`outage ${i}`) });
    await settle();
    assert.equal(system.tree().children[0]?.status, 'backoff');
    const [due] = clock.pendingTimers();
    observed.push((due as number) - clock.now());
    if (i === 4) await ref.tell({ op: 'work', id: 'during' });
    clock.advance((due as number) - clock.now() - 1);
    await settle();
    assert.equal(system.tree().children[0]?.status, 'backoff', 'not restarted 1 ms early');
    if (i === 4) assert.equal(system.tree().children[0]?.mailboxDepth, 1, 'a message sent during the backoff waits');
    clock.advance(1);
    await settle();
    assert.equal(system.tree().children[0]?.status, 'running');
  }
  assert.deepEqual(observed, [100, 300, 900, 1000, 1000]);
  assert.deepEqual(journal.filter((line) => line.includes('got')), ['a:got during#6']);
  // It handled a message without failing: a new fault restarts after minMs again.
  await ref.tell({ op: 'throw', error: new Error('a new fault') });
  await settle();
  const [due] = clock.pendingTimers();
  assert.equal((due as number) - clock.now(), 100);
  await system.terminate();
});

test('backoff count resets after resetAfterMs of failure-free running', async () => {
  const clock = new ManualClock();
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  const strategy = SupervisorStrategy.restartWithBackoff({ minMs: 100, maxMs: 10_000, factor: 2, randomFactor: 0, resetAfterMs: 5000 });
  const ref = system.spawn('a', recordingBehavior('a', []), { supervision: strategy });
  const delays: number[] = [];
  const failAndRecover = async (): Promise<void> => {
    await ref.tell({ op: 'throw', error: new Error('x') });
    await settle();
    const [due] = clock.pendingTimers();
    delays.push((due as number) - clock.now());
    clock.advance((due as number) - clock.now());
    await settle();
  };
  await failAndRecover();
  await failAndRecover();
  clock.advance(5000);
  await failAndRecover();
  assert.deepEqual(delays, [100, 200, 100]);
  await system.terminate();
});

test('jitter is seeded: delays lie in [d, d * (1 + randomFactor)) and repeat with the same seed', () => {
  const backoff = { minMs: 3000, maxMs: 30_000, factor: 2, randomFactor: 0.2, resetAfterMs: 3000 };
  const run = (): number[] => {
    const random = seededRandom(7);
    return [0, 1, 2, 3, 4, 5].map((n) => backoffDelay(backoff, n, random));
  };
  const first = run();
  assert.deepEqual(first, run());
  const bases = [3000, 6000, 12_000, 24_000, 30_000, 30_000];
  first.forEach((delay, i) => {
    const base = bases[i] as number;
    assert.ok(delay >= base && delay < base * 1.2, `${delay} in [${base}, ${base * 1.2})`);
  });
});

test('a rule-specific backoff applies only to matching failures', async () => {
  const clock = new ManualClock();
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  const strategy = SupervisorStrategy.oneForOne().on('SF_ERR_BROKER_DISCONNECTED', 'restart', { backoff: { minMs: 250, maxMs: 250, randomFactor: 0 } });
  const journal: string[] = [];
  const ref = system.spawn('a', recordingBehavior('a', journal), { supervision: strategy });
  await ref.tell({ op: 'throw', error: new Error('plain') });
  await settle();
  assert.equal(system.tree().children[0]?.status, 'running', 'plain errors restart at once');
  await ref.tell({ op: 'throw', error: Object.assign(new Error('gone'), { code: 'SF_ERR_BROKER_DISCONNECTED' }) });
  await settle();
  assert.equal(system.tree().children[0]?.status, 'backoff');
  clock.advance(250);
  await settle();
  assert.equal(system.tree().children[0]?.status, 'running');
  await system.terminate();
});

test('stopping an actor in backoff cancels its restart timer', async () => {
  const clock = new ManualClock();
  const journal: string[] = [];
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  const ref = system.spawn('a', recordingBehavior('a', journal), {
    supervision: SupervisorStrategy.restartWithBackoff({ minMs: 1000, maxMs: 1000, randomFactor: 0 }),
  });
  await ref.tell({ op: 'throw', error: new Error('x') });
  await settle();
  assert.equal(clock.pendingTimers().length, 1);
  await ref.stop();
  assert.equal(clock.pendingTimers().length, 0);
  assert.deepEqual(journal, ['a:start#1', 'a:stop#1']);
  await system.terminate();
});

/**
 * Lets the child run `ranMs`, fails it with `error`, and lets its backoff run out.
 * @returns the backoff delay in ms, or undefined when no restart was scheduled (stopped or escalated)
 */
async function failAfter(clock: ManualClock, ref: ActorRef<Recording, string>, ranMs: number, error: Error): Promise<number | undefined> {
  clock.advance(ranMs);
  await ref.tell({ op: 'throw', error });
  await settle();
  const [due] = clock.pendingTimers();
  if (due === undefined) return undefined;
  const delay = (due as number) - clock.now();
  clock.advance(delay);
  await settle();
  return delay;
}

// Found by a new user: a 3 s Pulsar restart stopped every worker. Each partition failed some
// 30 ms after its restart (the broker's connect refused); with the backoff reset after its
// minimum, 10 ms, every restart began again at 10 ms: 100 restarts in 4 s, then escalation.
test('the default stage supervision rides out a broker outage: failures 30 ms after each restart back off to 1 s, never reaching the limit', async () => {
  const clock = new ManualClock();
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  const ref = system.spawn('a', recordingBehavior('a', []), { supervision: DEFAULT_STAGE_SUPERVISION });
  await settle();
  const delays: number[] = [];
  for (let i = 0; i < 150; i++) {
    const delay = await failAfter(clock, ref, 30, new ProducerFailedError('send failed', { cause: new BrokerDisconnectedError('pulsar ws://127.0.0.1:8080: connect ECONNREFUSED') }));
    assert.ok(delay !== undefined, `restart ${i}: the child was not stopped or escalated`);
    delays.push(delay);
  }
  assert.ok(delays.slice(8).every((d) => d >= 1000), `backed off to 1 s: ${delays.slice(0, 12).join(', ')} ms`);
  assert.equal(system.tree().children[0]?.status, 'running');
  // Once it handles a message, the next failure backs off from 10 ms again.
  await ref.tell({ op: 'work', id: 'back' });
  await settle();
  await ref.tell({ op: 'throw', error: new BrokerDisconnectedError('again') });
  await settle();
  const [due] = clock.pendingTimers();
  assert.ok((due as number) - clock.now() < 20);
  await system.terminate();
});

test('other failures some ms after each restart keep the reset of resetAfterMs: a crash loop reaches the limit and escalates', async () => {
  const clock = new ManualClock();
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  const ref = system.spawn('a', recordingBehavior('a', []), { supervision: DEFAULT_STAGE_SUPERVISION });
  await settle();
  let restarts = 0;
  for (let i = 0; i < 150; i++) {
    const delay = await failAfter(clock, ref, 30, new Error('a store of another shape'));
    if (delay === undefined) break;
    assert.ok(delay < 20, 'backoff reset after minMs of running');
    restarts++;
  }
  assert.equal(restarts, 100, 'escalated at the restart intensity (100 in 10 s)');
  await system.terminate();
});
