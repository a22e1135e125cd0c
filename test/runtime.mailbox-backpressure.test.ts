import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, type Behavior } from '../src/runtime/actor/index.js';
import { ManualClock, recordingLogger, settle } from './kit/index.js';

/** An actor whose receive() waits until the test calls `release()`, so its mailbox fills up. */
function gated() {
  const seen: number[] = [];
  const gates: (() => void)[] = [];
  const behavior: Behavior<number, void, void> = {
    kind: 'gated',
    start: () => undefined,
    receive: (_s, n) =>
      new Promise<void>((resolve) => {
        seen.push(n);
        gates.push(resolve);
      }),
  };
  const release = async (): Promise<void> => {
    gates.shift()?.();
    await settle();
  };
  return { seen, behavior, release };
}

test('a full backpressure mailbox makes tell() wait until receive() frees a slot, in FIFO order', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const { seen, behavior, release } = gated();
  const ref = system.spawn('g', behavior, { mailbox: { capacity: 2 } });
  await settle();
  await ref.tell(0); // taken by receive() at once
  await settle();
  await ref.tell(1);
  await ref.tell(2); // mailbox now full: [1, 2]
  const resolved: number[] = [];
  const t3 = ref.tell(3).then(() => resolved.push(3));
  const t4 = ref.tell(4).then(() => resolved.push(4));
  await settle();
  assert.deepEqual(resolved, [], 'senders wait while full');
  assert.equal(system.tree().children[0]?.mailboxDepth, 2);
  await release(); // 0 done, 1 taken, 3 admitted
  assert.deepEqual(resolved, [3]);
  await release(); // 1 done, 2 taken, 4 admitted
  assert.deepEqual(resolved, [3, 4]);
  await Promise.all([t3, t4]);
  for (let i = 0; i < 3; i++) await release();
  assert.deepEqual(seen, [0, 1, 2, 3, 4]);
  await system.terminate();
});

test('senders still waiting when the actor stops are rejected with ActorStoppedError', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const { behavior, release } = gated();
  const ref = system.spawn('g', behavior, { mailbox: { capacity: 1 } });
  await settle();
  await ref.tell(0);
  await settle();
  await ref.tell(1);
  const waiting = assert.rejects(ref.tell(2), { code: 'SF_ERR_ACTOR_STOPPED' });
  const stopped = ref.stop();
  await release(); // lets the in-flight receive finish so stop can proceed
  await stopped;
  await waiting;
  await system.terminate();
});

test("'drop-newest' drops and counts; 'fail' rejects with MailboxFullError", async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const dropper = gated();
  const failer = gated();
  const d = system.spawn('d', dropper.behavior, { mailbox: { capacity: 1, overflow: 'drop-newest' } });
  const f = system.spawn('f', failer.behavior, { mailbox: { capacity: 1, overflow: 'fail' } });
  await settle();
  await d.tell(0);
  await f.tell(0);
  await settle();
  await d.tell(1);
  await d.tell(2); // dropped, still resolves
  await assert.rejects(d.ask(3), { code: 'SF_ERR_MAILBOX_FULL' });
  await f.tell(1);
  await assert.rejects(f.tell(2), { code: 'SF_ERR_MAILBOX_FULL', name: 'MailboxFullError' });
  const node = system.tree().children.find((n) => n.path === '/d');
  assert.equal(node?.dropped, 2);
  await dropper.release();
  await dropper.release();
  assert.deepEqual(dropper.seen, [0, 1]);
  await failer.release();
  await failer.release();
  assert.deepEqual(failer.seen, [0, 1]);
  await system.terminate();
});

test('bad mailbox options are rejected at spawn', () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const { behavior } = gated();
  assert.throws(() => system.spawn('x', behavior, { mailbox: { capacity: 0 } }), { code: 'SF_ERR_INVALID_ARGUMENT' });
  assert.throws(() => system.spawn('y', behavior, { mailbox: { capacity: 1.5 } }), { code: 'SF_ERR_INVALID_ARGUMENT' });
  assert.throws(() => system.spawn('a/b', behavior), { code: 'SF_ERR_INVALID_ARGUMENT' });
  system.spawn('z', behavior);
  assert.throws(() => system.spawn('z', behavior), { code: 'SF_ERR_INVALID_ARGUMENT' });
});
