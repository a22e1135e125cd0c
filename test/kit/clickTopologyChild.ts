// One run of the data-dir tests' click counter (./clickTopology.ts) in its own process, so
// that a test can SIGKILL it and start it again on the same data dir:
//
//   node --import tsx test/kit/clickTopologyChild.ts --data-dir D [--broker memory|redis://...] [--prefix P]
//        [--from N] [--events E] [--sent-file F] [--kill-stage count|totals --kill-at K]
//        [--on-unclean refuse|discard-in-flight] [--hold] [--offsets]
//
// It starts the topology, sends clicks N .. N+E-1 one at a time through a producer (after
// each send resolves, F holds how many were sent), waits for quiescence and prints one JSON
// line: { recovery, count, totals } (clicks per host in each stage). With --kill-at K it
// SIGKILLs itself just before stage S applies its K-th message (a seeded point mid-stream).
// With --hold it prints "started" after the start and stops when stdin closes. A refused
// start prints the error on stderr and exits 2. With --offsets the producer is opened with
// source offsets (offset n for click n), F holds its resumeOffset() instead, and the line
// also holds `dead`, the dead letters of both stages.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { MemoryBroker, RedisStreamsBroker, isShardflowError, type Broker, type Logger, type UncleanPolicy } from '../../src/index.js';
import { clickTopology, clicks, hooks, hostOf } from './clickTopology.js';

const { values: args } = parseArgs({
  options: {
    'data-dir': { type: 'string' },
    broker: { type: 'string', default: 'memory' },
    prefix: { type: 'string', default: 'sf:' },
    from: { type: 'string', default: '0' },
    events: { type: 'string', default: '0' },
    'sent-file': { type: 'string' },
    'kill-stage': { type: 'string', default: 'count' },
    'kill-at': { type: 'string' },
    'on-unclean': { type: 'string', default: 'refuse' },
    hold: { type: 'boolean', default: false },
    offsets: { type: 'boolean', default: false },
  },
});
const logger: Logger = {
  debug() {},
  warn: (fields, message) => console.error(`warn: ${message ?? ''} ${JSON.stringify(fields)}`),
  error: (fields, message) => console.error(`error: ${message ?? ''} ${JSON.stringify(fields)}`),
};

if (args['kill-at'] !== undefined) {
  const killAt = Number(args['kill-at']);
  let applied = 0;
  hooks.onApply = (stage) => {
    if (stage === args['kill-stage'] && ++applied >= killAt) process.kill(process.pid, 'SIGKILL');
  };
}

const broker: Broker = args.broker === 'memory'
  ? new MemoryBroker()
  : await RedisStreamsBroker.connect({ url: args.broker, prefix: args.prefix, heartbeatMs: 100, deadAfterMs: 1500, blockMs: 100 });
let running;
try {
  running = await clickTopology.start({ broker, dataDir: args['data-dir']!, logger, onUnclean: args['on-unclean'] as UncleanPolicy });
} catch (err) {
  console.error(isShardflowError(err) ? `${err.name} ${err.code}: ${err.message}` : err);
  await broker.close();
  process.exit(2);
}
if (args.hold) {
  console.log('started');
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.on('end', resolve));
} else {
  const producer = await running.producer(clicks, 'clicks-src', { offsets: args.offsets });
  const from = Number(args.from);
  const events = Number(args.events);
  for (let n = from; n < from + events; n++) {
    await producer.send({ host: hostOf(n), n }, args.offsets ? { offset: n } : undefined);
    // With offsets, the offset to resume from (producer.resumeOffset()); else how many were sent.
    if (args['sent-file']) writeFileSync(args['sent-file'], String(args.offsets ? producer.resumeOffset() : n - from + 1));
  }
  await running.quiescence({ timeoutMs: 60_000 });
  const count = Object.fromEntries((await running.askAll('count', 'hosts')).flat());
  const totals = Object.fromEntries((await running.askAll('totals', 'hosts')).flat());
  const dead = args.offsets ? [...(await running.deadLetters('count')), ...(await running.deadLetters('totals'))].map((d) => d.reason) : undefined;
  console.log(JSON.stringify({ recovery: running.recovery, count, totals, ...(dead ? { dead } : {}) }));
}
await running.stop();
await broker.close();
