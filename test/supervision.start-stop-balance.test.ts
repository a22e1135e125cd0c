import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, ChaosPolicy, type Behavior } from '../src/runtime/actor/index.js';
import { SupervisorStrategy, seededRandom, type ChildSpec } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingLogger, settle } from './kit/index.js';

/**
 * Invariant under heavy, seeded chaos across nested one-for-one / one-for-all / rest-for-one
 * supervisors with backoff, async receives, ad-hoc stops and a final terminate(): every successful
 * start() is matched by exactly one stop(), no stop() runs twice for one incarnation, and
 * terminate() completes.
 */
test('every start() is paired with exactly one stop() under chaos, backoff and stops', async () => {
  for (const seed of [1, 2, 3, 4, 5]) {
    const clock = new ManualClock();
    const logger = recordingLogger();
    const system = ActorSystem.create({ name: 'fuzz', clock, logger, random: seededRandom(seed), chaos: ChaosPolicy.create({ rate: 0.15, seed }) });
    let escalations = 0;
    system.events$.subscribe((event) => {
      if (event.type === '@shardflow.escalated') escalations++;
    });
    const live = new Map<string, number>();
    let started = 0;
    let stopped = 0;
    const worker = (name: string, asyncReceive: boolean): Behavior<number, { id: string }, number> => {
      let incarnation = 0;
      return {
        kind: 'worker',
        start: () => {
          const id = `${name}#${++incarnation}`;
          assert.ok(!live.has(id), `start twice ${id}`);
          live.set(id, 1);
          started++;
          return { id };
        },
        receive: (_s, n) => (asyncReceive ? Promise.resolve(n) : n),
        stop: (state) => {
          assert.ok(live.delete(state.id), `stop without start or twice: ${state.id}`);
          stopped++;
        },
      };
    };
    const backoff = { minMs: 10, maxMs: 80, randomFactor: 0.5 };
    const group = (prefix: string): ChildSpec[] =>
      ['a', 'b', 'c'].map((n, i) => ({ name: n, behavior: worker(`${prefix}/${n}`, i % 2 === 0) }));
    system.supervise('root', SupervisorStrategy.oneForOne().withBackoff(backoff), [
      { name: 'all', strategy: SupervisorStrategy.oneForAll().withBackoff(backoff).withLimit(2, 200), children: group('all') },
      { name: 'rest', strategy: SupervisorStrategy.restForOne().withLimit(2, 200), children: group('rest') },
      { name: 'one', strategy: SupervisorStrategy.oneForOne().withBackoff(backoff).withLimit(1, 200), children: group('one') },
    ]);
    const paths = ['all', 'rest', 'one'].flatMap((g) => ['a', 'b', 'c'].map((n) => `/root/${g}/${n}`));
    const random = seededRandom(seed * 31);
    for (let step = 0; step < 300; step++) {
      const path = paths[Math.floor(random() * paths.length)] as string;
      const ref = system.lookup<number, number>(path);
      if (ref !== undefined) {
        if (random() < 0.01) void ref.stop();
        else ref.tell(step).catch(() => undefined);
      }
      if (step % 10 === 0) await settle(2);
      clock.advance(Math.floor(random() * 5));
    }
    clock.advance(1000);
    await settle();
    const termination = await system.terminate();
    assert.equal(termination.kind, 'terminated', `seed ${seed}`);
    assert.equal(live.size, 0, `seed ${seed}: still live ${[...live.keys()]}`);
    assert.equal(started, stopped);
    assert.ok(started > 9, `seed ${seed}: restarts happened (${started} starts)`);
    assert.ok(escalations > 0, `seed ${seed}: some group exceeded its limit and escalated`);
    assert.deepEqual(clock.pendingTimers().filter((t) => t > clock.now() + 5000), [], 'no long timers left (asks)');
    assert.equal(logger.entries.filter((e) => e.level === 'error').length, 0, JSON.stringify(logger.entries.filter((e) => e.level === 'error')));
  }
});
