import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataDirError, MemoryBroker, TOPOLOGY_LOCK_FILE, TOPOLOGY_RECORD_FILE, Topology, readTopologyRecord, type Logger } from '../src/index.js';
import { clickTopology, clicks, hooks, hostOf } from './kit/clickTopology.js';
import { runClickChild } from './kit/clickTopologyRun.js';
import { tempDir } from './kit/datasets.js';

/**
 * One run at a time on a topology data dir: a second process, or a second start in this
 * one, is refused while the first runs (naming its pid); the lock goes with the stop. A data
 * dir holds one topology. `partitionOfKey` gives the partition of a routing key.
 */
const quiet: Logger = { debug() {}, warn() {}, error() {} };

test('a second process on a data dir in use is refused, naming the first; so is a second start in one process', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-dd-lock-');
  const dataDir = join(dir, 'data');
  try {
    let second: ReturnType<typeof runClickChild> | undefined;
    let inProcess: Promise<unknown> | undefined;
    let firstPid = 0;
    const first = await runClickChild(['--data-dir', dataDir, '--hold'], {
      onStarted: (child) => {
        firstPid = child.pid!;
        second = runClickChild(['--data-dir', dataDir, '--events', '10']);
        inProcess = clickTopology.start({ broker: new MemoryBroker(), dataDir, logger: quiet }).then(
          () => assert.fail('a start in this process on a data dir in use must be refused'),
          (err: unknown) => err,
        );
        void Promise.all([second, inProcess]).then(() => child.stdin!.end()); // then the first stops
      },
    });
    assert.equal(first.code, 0, first.stderr);
    const b = await second!;
    assert.equal(b.code, 2, b.stderr);
    assert.match(b.stderr, new RegExp(`DataDirError SF_ERR_DATA_DIR: data dir .* is in use by process ${firstPid} \\(a topology runs on it\\)`));
    const err = await inProcess!;
    assert.ok(err instanceof DataDirError && err.message.includes(`in use by process ${firstPid}`), String(err));
    assert.ok(!existsSync(join(dataDir, TOPOLOGY_LOCK_FILE)), 'the stop released the lock');
    assert.equal(readTopologyRecord(dataDir)?.state, 'quiet', 'a stop with nothing in flight is quiet');

    const broker = new MemoryBroker();
    const running = await clickTopology.start({ broker, dataDir, logger: quiet });
    await assert.rejects(clickTopology.start({ broker, dataDir, logger: quiet }), (e: unknown) =>
      e instanceof DataDirError && e.message.includes(`in use by process ${process.pid}`));
    await running.stop();
    const again = await clickTopology.start({ broker, dataDir, logger: quiet });
    assert.equal(again.recovery.previous, 'quiet');
    await again.stop();
    await broker.close();
  } finally {
    cleanup();
  }
});

test('a data dir holds one topology; a stop with messages in flight is not quiet; a damaged or missing record; partitionOfKey', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-dd-record-');
  const dataDir = join(dir, 'data');
  const broker = new MemoryBroker();
  try {
    const running = await clickTopology.start({ broker, dataDir, logger: quiet });
    assert.equal(running.recovery.previous, 'new');
    assert.equal(readTopologyRecord(dataDir)?.state, 'running', 'running from the end of start');
    const host = hostOf(3);
    const p = running.partitionOfKey('count', host);
    assert.equal(p, clicks.partitioner.forKey(host));
    assert.equal(running.partitionOfKey(clicks, host), p, 'a namespace or a stage (its input namespace)');
    assert.throws(() => running.partitionOfKey('nope' as 'count', host), RangeError);
    const producer = await running.producer(clicks, 'src');
    for (let n = 0; n < 50; n++) await producer.send({ host: hostOf(n), n });
    await running.quiescence({ timeoutMs: 30_000 });
    const counts = new Map((await running.ask('count', p, 'hosts')));
    assert.equal(counts.get(host), 2, 'the partition of the key holds its count (50 clicks over 40 hosts)');
    // A message on the broker that the stage cannot apply (its handler fails) when the stop comes: not quiet.
    hooks.onApply = () => {
      throw new Error('not now');
    };
    try {
      await producer.send({ host, n: 50 });
      await running.stop();
    } finally {
      hooks.onApply = undefined;
    }
    assert.equal(readTopologyRecord(dataDir)?.state, 'running', 'a stop with a message in flight stays running');
    await assert.rejects(clickTopology.start({ broker: new MemoryBroker(), dataDir, logger: quiet }), /did not stop quiet .* on the in-memory broker/);

    const other = Topology.create('other').stage('count', clickTopology.stages[0]!.def as never);
    await assert.rejects(other.start({ broker, dataDir, logger: quiet }), (e: unknown) =>
      e instanceof DataDirError && /holds topology dd-clicks, not other/.test(e.message));

    const record = join(dataDir, TOPOLOGY_RECORD_FILE);
    writeFileSync(record, '{"format": 1, "topology": "dd-clicks"');
    await assert.rejects(clickTopology.start({ broker, dataDir, logger: quiet }), (e: unknown) =>
      e instanceof DataDirError && /topology data dir record .*topology\.json is damaged/.test(e.message));
    // Stores without a record (written before records): how the last run ended is unknown.
    rmSync(record);
    await assert.rejects(clickTopology.start({ broker, dataDir, logger: quiet }), /holds stage stores but no topology\.json .* may be lost/);
    const warnings: string[] = [];
    const fresh = new MemoryBroker(); // as a new process has: the message left unapplied above is not on it
    const discarding = await clickTopology.start({ broker: fresh, dataDir, onUnclean: 'discard-in-flight', logger: { ...quiet, warn: (_f, m) => void warnings.push(m ?? '') } });
    assert.equal(discarding.recovery.previous, 'discarded-in-flight');
    assert.match(warnings.join('\n'), /starting anyway without them \(onUnclean: 'discard-in-flight'\)/);
    assert.equal(new Map(await discarding.ask('count', p, 'hosts')).get(host), 2, 'what was applied stays');
    await discarding.quiescence({ timeoutMs: 30_000 });
    await discarding.stop();
    await fresh.close();
    assert.equal(readTopologyRecord(dataDir)?.state, 'quiet');
  } finally {
    await broker.close();
    cleanup();
  }
});
