import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DirectoryObjects } from '../src/checkpoint/directoryObjects.js';
import { IncrementalCheckpointStore } from '../src/checkpoint/incremental.js';
import type { CheckpointObjects } from '../src/checkpoint/objects.js';
import { S3Objects, s3ConnectionFromEnv } from '../src/checkpoint/s3Objects.js';
import { CheckpointDamagedError } from '../src/errors.js';
import { Store } from '../src/storage/index.js';
import { s3Env, S3_BUCKET, s3Unavailable } from './kit/s3.js';
import { expectedAfter, walColumnFamilies, walContents, writeWalBatch } from './kit/walCheckpoint.js';
import { freshPaths } from './kit/freshPaths.js';

/**
 * Issue 16, group commits (docs/checkpoints.md, "Group commits"): the WAL tail puts of a
 * parent's keys that a fenced writer makes at once go into one object, and every read of the
 * checkpoint store finds them there. On real RocksDB stores and the real checkpoint stores (a
 * directory, and the S3 server of scripts/s3/start.sh: skipped without it, failed instead
 * under SHARDFLOW_REQUIRE_BROKERS=1): fewer objects than puts, exact restores from a store
 * object that did not put them (another process), collects that remove a group object only
 * once none of its keys keeps it, and a remove that leaves the other keys whole.
 */

const fresh = freshPaths('shardflow-group-commit-');

/** Counts the objects `objects` stores (`putBytes`, `putAllThen`'s last). */
function countingPuts(objects: CheckpointObjects): { objects: CheckpointObjects; puts: string[] } {
  const puts: string[] = [];
  const putBytes = objects.putBytes.bind(objects);
  objects.putBytes = async (name, bytes) => {
    puts.push(name);
    return putBytes(name, bytes);
  };
  const putAllThen = objects.putAllThen.bind(objects);
  objects.putAllThen = async (first, last) => {
    puts.push(...first.map((o) => o.name), last.name);
    return putAllThen(first, last);
  };
  return { objects, puts };
}

const targets: Array<{ name: string; unavailable: () => Promise<string | undefined>; open: (prefix: string) => CheckpointObjects }> = [
  { name: 'directory', unavailable: async () => undefined, open: (dir) => new DirectoryObjects(dir) },
  { name: 's3 (the local S3 server)', unavailable: s3Unavailable, open: (prefix) => new S3Objects(S3_BUCKET, prefix, s3ConnectionFromEnv(s3Env())) },
];

const KEYS = ['c/s/p0', 'c/s/p1', 'c/s/p2', 'c/s/p3'];
const KEEP = 2;
/** A chain's log limit small enough for several chains in the test (each a new base, so that older chunks are collected). */
const TAIL = { walTailBytes: 8192 };

for (const target of targets) {
  const reason = await target.unavailable();
  describe(`group commits: ${target.name}`, { skip: reason ? `unavailable: ${reason}` : false }, () => {
    it('concurrent tail puts share objects; another store object restores each key exactly, collects keep what is kept and remove the rest; a remove leaves the other keys whole', { timeout: 120_000 }, async () => {
      const where = target.name === 'directory' ? fresh('ckpt') : `test/group-commit-${process.pid}-${randomBytes(4).toString('hex')}`;
      const { objects, puts } = countingPuts(target.open(where));
      const checkpoints = new IncrementalCheckpointStore(objects);
      const stores = await Promise.all(KEYS.map(() => Store.open({ path: fresh('db'), columnFamilies: walColumnFamilies })));
      // Key i has had written[i] batches: each key a different count, so that a restore of
      // one key from another's manifest shows.
      const written = KEYS.map(() => 0);
      const write = async (i: number, batches: number) => {
        for (let b = 0; b < batches; b++) await writeWalBatch(stores[i]!, written[i]!++);
      };
      const atSequence = new Map<string, number>(); // `${key}@${seq}` -> batches it holds
      const reader = new IncrementalCheckpointStore(target.open(where)); // another process
      try {
        for (const [i] of KEYS.entries()) await write(i, 20 + i * 3);
        await Promise.all(KEYS.map(async (key, i) => {
          const r = await checkpoints.put(key, stores[i]!, 1, { ...TAIL, fencedWriter: true, groupCommit: { keep: KEEP } });
          assert.equal(r.walTail, false);
          atSequence.set(`${key}@1`, written[i]!);
        }));
        let tailPuts = 0;
        let tailObjects = 0;
        for (let seq = 2; seq <= 13; seq++) {
          for (const [i] of KEYS.entries()) await write(i, 3 + ((seq + i) % 4));
          const before = puts.length;
          await Promise.all(KEYS.map(async (key, i) => {
            const held = written[i]!;
            const r = await checkpoints.put(key, stores[i]!, seq, { ...TAIL, fencedWriter: true, groupCommit: { keep: KEEP } });
            assert.equal(r.walTail, true, `${key}@${seq} is a tail put`);
            tailPuts++;
            atSequence.set(`${key}@${seq}`, held);
          }));
          tailObjects += puts.length - before;
          // The bases made in the background are ready before the next puts, which adopt them
          // (ending the chains, so that the collects below have old entries to remove), whatever
          // the machine's load.
          await checkpoints.settled();
          if (seq % 4 === 0) {
            for (const key of KEYS) {
              const c = await checkpoints.collect(key, KEEP);
              assert.deepEqual(c.kept, [seq, seq - 1]);
            }
          }
        }
        // How many share an object depends on the puts' timing (the linger waits 20 ms at most):
        // over the rounds, fewer objects than puts.
        assert.ok(tailObjects < tailPuts, `${tailPuts} tail puts stored ${tailObjects} objects: fewer than one each`);
        const groups = puts.filter((p) => p.includes('/_groups/'));
        assert.ok(groups.length > 0, 'some tail puts went into group objects');
        assert.ok(tailPuts > puts.filter((p) => p.includes('/manifests/') || p.includes('/_groups/')).length - KEYS.length, 'fewer manifest objects than tail puts');
        // Every key's checkpoints, as another process lists them: as the writer lists them (the
        // collected ones left out by the floors in the group objects' names).
        for (const key of KEYS) {
          const seqs = await reader.list(key);
          assert.equal(seqs[seqs.length - 1], 13, `${key}: the latest is 13`);
          assert.deepEqual(seqs, await checkpoints.list(key), `${key}: another process lists what the writer lists`);
          assert.ok(!seqs.includes(2), `${key}: a collected checkpoint is not listed (${seqs.join(', ')})`);
        }
        // Restores by the other store object: the latest of each key, and an older kept one.
        for (const [i, key] of KEYS.entries()) {
          for (const sequence of [undefined, 12]) {
            const dir = fresh('restored');
            const r = await reader.restore(key, dir, sequence === undefined ? {} : { sequence });
            const restored = await Store.open({ path: dir, columnFamilies: walColumnFamilies });
            try {
              assert.deepEqual(await walContents(restored), expectedAfter(atSequence.get(`${key}@${r.manifest.sequence}`)!), `${key}@${r.manifest.sequence} restores exactly`);
            } finally {
              await restored.close();
            }
          }
          void i;
        }
        // A last collect of every key by the other process: the group objects left each hold a
        // kept checkpoint (or one whose packed chunks a kept one reads).
        for (const key of KEYS) await reader.collect(key, KEEP);
        const left = (await objects.list('c/s/_groups/')).map((o) => o.name);
        assert.ok(left.length < groups.length, `collects removed group objects (${groups.length} stored, ${left.length} left)`);
        for (const key of KEYS) {
          const dir = fresh('after-collect');
          const r = await reader.restore(key, dir);
          const restored = await Store.open({ path: dir, columnFamilies: walColumnFamilies });
          try {
            assert.deepEqual(await walContents(restored), expectedAfter(atSequence.get(`${key}@${r.manifest.sequence}`)!), `${key} restores exactly after the collects`);
          } finally {
            await restored.close();
          }
        }
        // A remove of one key: gone for every process; the others still restore.
        assert.ok((await checkpoints.remove('c/s/p1')) > 0);
        assert.deepEqual(await reader.list('c/s/p1'), []);
        assert.deepEqual(await new IncrementalCheckpointStore(target.open(where)).list('c/s/p1'), []);
        for (const [i, key] of KEYS.entries()) {
          if (i === 1) continue;
          const dir = fresh('after-remove');
          const r = await new IncrementalCheckpointStore(target.open(where)).restore(key, dir);
          assert.equal(r.manifest.sequence, 13);
          const restored = await Store.open({ path: dir, columnFamilies: walColumnFamilies });
          try {
            assert.deepEqual(await walContents(restored), expectedAfter(atSequence.get(`${key}@13`)!), `${key} restores exactly after p1's remove`);
          } finally {
            await restored.close();
          }
        }
      } finally {
        for (const s of stores) await s.close();
        await checkpoints.close();
        await reader.close();
      }
    });

    it('16 keys putting at once: every object is stored (names within a file name, as S3-compatible servers that keep files need), several manifests per object', { timeout: 120_000 }, async () => {
      const where = target.name === 'directory' ? fresh('ckpt') : `test/group-many-${process.pid}-${randomBytes(4).toString('hex')}`;
      const { objects, puts } = countingPuts(target.open(where));
      const checkpoints = new IncrementalCheckpointStore(objects);
      const keys = Array.from({ length: 16 }, (_, i) => `cluster-name/stage-name/p${i}`);
      const stores = await Promise.all(keys.map(() => Store.open({ path: fresh('db'), columnFamilies: walColumnFamilies })));
      try {
        const epoch = 2 ** 32 * 7; // a later owner's sequences: the names' longest numbers
        for (const s of stores) for (let b = 0; b < 10; b++) await writeWalBatch(s, b);
        await Promise.all(keys.map((key, i) => checkpoints.put(key, stores[i]!, epoch + 1, { fencedWriter: true, groupCommit: { keep: KEEP } })));
        let tailObjects = 0;
        let most = 0;
        for (let round = 2; round <= 4; round++) {
          for (const s of stores) for (let b = 0; b < 3; b++) await writeWalBatch(s, 10 * round + b);
          const before = puts.length;
          const reports = await Promise.all(keys.map((key, i) => checkpoints.put(key, stores[i]!, epoch + round, { fencedWriter: true, groupCommit: { keep: KEEP } })));
          assert.ok(reports.every((r) => r.walTail), 'every put a tail put');
          tailObjects += puts.length - before;
          most = Math.max(most, ...reports.map((r) => r.groupedManifests));
        }
        // (How many share an object depends on the puts' timing: loose bounds.)
        assert.ok(tailObjects <= 24, `48 tail puts stored ${tailObjects} objects: at most half`);
        assert.ok(most >= 4, `a group object holds 4 or more manifests (most: ${most})`);
        for (const name of puts) assert.ok(path.basename(name).length <= 255, `${name}: a name segment of ${path.basename(name).length} bytes`);
        const reader = new IncrementalCheckpointStore(target.open(where));
        for (const key of keys) assert.equal((await reader.latest(key))?.sequence, epoch + 4);
        await reader.close();
      } finally {
        for (const s of stores) await s.close();
        await checkpoints.close();
      }
    });

    it('getRange reads a part of an object: within it, across its end, past its end; undefined for a missing object', { timeout: 30_000 }, async () => {
      const where = target.name === 'directory' ? fresh('ckpt') : `test/group-range-${process.pid}-${randomBytes(4).toString('hex')}`;
      const objects = target.open(where);
      try {
        const bytes = randomBytes(10_000);
        await objects.putBytes('c/s/_groups/x', bytes);
        assert.deepEqual(await objects.getRange('c/s/_groups/x', 1234, 100), bytes.subarray(1234, 1334));
        assert.deepEqual(await objects.getRange('c/s/_groups/x', 9_990, 100), bytes.subarray(9_990));
        assert.equal((await objects.getRange('c/s/_groups/x', 10_000, 10))?.length, 0);
        assert.equal(await objects.getRange('c/s/_groups/missing', 0, 10), undefined);
      } finally {
        await objects.close();
      }
    });

    it('a damaged group object refuses the restore with the object named', { timeout: 60_000 }, async () => {
      const where = target.name === 'directory' ? fresh('ckpt') : `test/group-damaged-${process.pid}-${randomBytes(4).toString('hex')}`;
      const objects = target.open(where);
      const checkpoints = new IncrementalCheckpointStore(objects);
      const stores = await Promise.all(KEYS.map(() => Store.open({ path: fresh('db'), columnFamilies: walColumnFamilies })));
      try {
        for (const [i, s] of stores.entries()) for (let b = 0; b < 10 + i; b++) await writeWalBatch(s, b);
        await Promise.all(KEYS.map((key, i) => checkpoints.put(key, stores[i]!, 1, { ...TAIL, fencedWriter: true, groupCommit: { keep: KEEP } })));
        for (const [i, s] of stores.entries()) for (let b = 10 + i; b < 20 + i; b++) await writeWalBatch(s, b);
        await Promise.all(KEYS.map((key, i) => checkpoints.put(key, stores[i]!, 2, { ...TAIL, fencedWriter: true, groupCommit: { keep: KEEP } })));
        const groups = (await objects.list('c/s/_groups/')).map((o) => o.name);
        assert.ok(groups.length >= 1, 'the tail puts made a group object');
        await objects.putBytes(groups[0]!, Buffer.from('not a group header\n'));
        const leaf = groups[0]!.slice('c/s/_groups/'.length).split('-')[0]!;
        await assert.rejects(
          new IncrementalCheckpointStore(target.open(where)).restore(`c/s/${leaf}`, fresh('restored')),
          (err: unknown) => err instanceof CheckpointDamagedError && err.message.includes(groups[0]!) && /header/.test(err.message),
        );
      } finally {
        for (const s of stores) await s.close();
        await checkpoints.close();
      }
    });
  });
}
