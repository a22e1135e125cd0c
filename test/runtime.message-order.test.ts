import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, type Behavior } from '../src/runtime/actor/index.js';
import { createProbe, ManualClock, recordingLogger, settle } from './kit/index.js';

test('messages are handled one at a time in send order, across drain turns', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const probe = createProbe<number>();
  const ref = system.spawn('probe', probe.behavior);
  for (let i = 0; i < 5000; i++) void ref.tell(i); // more than one drain turn (1024 per turn)
  assert.equal(await probe.next(), 0);
  await settle();
  assert.deepEqual(probe.messages, Array.from({ length: 5000 }, (_, i) => i));
  await system.terminate();
});

test('an async receive() finishes before the next message starts', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const trace: string[] = [];
  let inside = 0;
  const serial: Behavior<number, void, void> = {
    kind: 'serial',
    start: () => undefined,
    receive: async (_s, n) => {
      inside++;
      assert.equal(inside, 1, 'no overlap');
      trace.push(`begin ${n}`);
      await Promise.resolve();
      await Promise.resolve();
      trace.push(`end ${n}`);
      inside--;
    },
  };
  const ref = system.spawn('s', serial);
  await Promise.all([ref.tell(1), ref.tell(2), ref.tell(3)]);
  await settle();
  assert.deepEqual(trace, ['begin 1', 'end 1', 'begin 2', 'end 2', 'begin 3', 'end 3']);
  await system.terminate();
});

test('an actor talks to a probe via ctx.self and replies through ask', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const probe = createProbe<string, number>({ reply: (m) => m.length });
  const probeRef = system.spawn('probe', probe.behavior);
  const relay: Behavior<string, void, number> = {
    kind: 'relay',
    start: () => undefined,
    receive: (_s, m) => probeRef.ask(`relayed:${m}`),
  };
  assert.equal(await system.spawn('relay', relay).ask('hi'), 'relayed:hi'.length);
  assert.deepEqual(probe.messages, ['relayed:hi']);
  await system.terminate();
});
