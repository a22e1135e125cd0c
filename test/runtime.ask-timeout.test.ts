import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, type Behavior } from '../src/runtime/actor/index.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingBehavior, recordingLogger, settle } from './kit/index.js';

test('ask resolves with receive()’s return value, sync or async', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const doubler: Behavior<number, void, number> = { kind: 'doubler', start: () => undefined, receive: (_s, n) => n * 2 };
  const slowDoubler: Behavior<number, void, number> = { kind: 'slow', start: () => undefined, receive: async (_s, n) => n * 2 };
  assert.equal(await system.spawn('d', doubler).ask(21), 42);
  assert.equal(await system.spawn('s', slowDoubler).ask(4), 8);
  await system.terminate();
});

test('ask rejects with AskTimeoutError after timeoutMs of clock time; a late reply is ignored', async () => {
  const clock = new ManualClock();
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  let release: (() => void) | undefined;
  const stuck: Behavior<string, void, string> = {
    kind: 'stuck',
    start: () => undefined,
    receive: (_s, m) => new Promise<string>((resolve) => (release = () => resolve(m))),
  };
  const ref = system.spawn('stuck', stuck);
  const answer = ref.ask('q', { timeoutMs: 500 });
  const outcome = assert.rejects(answer, { code: 'SF_ERR_ASK_TIMEOUT', name: 'AskTimeoutError' });
  await settle();
  clock.advance(499);
  await settle();
  let settled = false;
  void answer.then(() => (settled = true), () => (settled = true));
  await settle();
  assert.equal(settled, false, 'still pending at 499 ms');
  clock.advance(1);
  await outcome;
  release?.();
  await settle();
  assert.equal(system.tree().children[0]?.processed, 1);
  await system.terminate();
});

test('the default ask timeout is 5000 ms; Infinity disables it', async () => {
  const clock = new ManualClock();
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  const never: Behavior<string, void, string> = { kind: 'never', start: () => undefined, receive: () => new Promise<string>(() => {}) };
  const ref = system.spawn('never', never);
  void ref.ask('a').catch(() => undefined);
  void ref.ask('b', { timeoutMs: Infinity });
  await settle();
  assert.deepEqual(clock.pendingTimers(), [5000]);
  clock.advance(5000);
});

test('ask rejects with the error receive() threw, and the actor is supervised', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const journal: string[] = [];
  const ref = system.spawn('a', recordingBehavior('a', journal), { supervision: SupervisorStrategy.restart });
  const boom = new Error('no');
  await assert.rejects(ref.ask({ op: 'throw', error: boom }), (error) => error === boom);
  assert.equal(await ref.ask({ op: 'work', id: 'ok' }), 'ok@2');
  await system.terminate();
});

test('tell and ask on a stopped actor reject with ActorStoppedError', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const ref = system.spawn('a', recordingBehavior('a', []));
  await ref.stop();
  await ref.stop(); // idempotent
  await assert.rejects(ref.tell({ op: 'work', id: 'x' }), { code: 'SF_ERR_ACTOR_STOPPED' });
  await assert.rejects(ref.ask({ op: 'work', id: 'x' }), { code: 'SF_ERR_ACTOR_STOPPED' });
  await system.terminate();
});

test('messages sent before start() finishes wait and are handled in order', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  let open: (() => void) | undefined;
  const seen: number[] = [];
  const slowStart: Behavior<number, void, void> = {
    kind: 'slow-start',
    start: () => new Promise<void>((resolve) => (open = resolve)),
    receive: (_s, n) => void seen.push(n),
  };
  const ref = system.spawn('s', slowStart);
  for (let i = 0; i < 5; i++) await ref.tell(i);
  await settle();
  assert.deepEqual(seen, []);
  assert.equal(system.tree().children[0]?.status, 'starting');
  assert.equal(system.tree().children[0]?.mailboxDepth, 5);
  open?.();
  await settle();
  assert.deepEqual(seen, [0, 1, 2, 3, 4]);
  await system.terminate();
});
