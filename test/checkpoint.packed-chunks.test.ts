import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DirectoryObjects } from '../src/checkpoint/directoryObjects.js';
import { IncrementalCheckpointStore } from '../src/checkpoint/incremental.js';
import { decodeManifest, decodeManifestAndPayload, encodeManifest, manifestName } from '../src/checkpoint/manifest.js';
import type { CheckpointObjects } from '../src/checkpoint/objects.js';
import { S3Objects, s3ConnectionFromEnv } from '../src/checkpoint/s3Objects.js';
import { CheckpointDamagedError } from '../src/errors.js';
import { Store } from '../src/storage/index.js';
import { s3Env, S3_BUCKET, s3Unavailable } from './kit/s3.js';
import { expectedAfter, walColumnFamilies, walContents, writeWalBatch } from './kit/walCheckpoint.js';
import { freshPaths } from './kit/freshPaths.js';

/**
 * Issue 16, a cheaper round on S3: a WAL tail put packs the log's new bytes into its manifest's
 * own object (one request instead of a chunk and then a manifest; docs/checkpoints.md, "Packed
 * chunks"), and the next puts of the chain name those bytes in that manifest. On real RocksDB
 * stores and real checkpoint stores that copy log bytes (the S3 server of scripts/s3/start.sh,
 * skipped without it, failed instead under SHARDFLOW_REQUIRE_BROKERS=1; a directory on another
 * filesystem than the store, /dev/shm, where the log cannot be hard-linked): the object's form,
 * exact restores, and a refusal with the reason when a holder is gone or a byte is damaged.
 */

const fresh = freshPaths('shardflow-packed-');
/** Numbers the stores' folders on /dev/shm. */
let n = 0;

const targets: Array<{ name: string; unavailable: () => Promise<string | undefined>; open: () => { objects: CheckpointObjects; cleanup: () => Promise<void> } }> = [
  {
    name: 'directory on another filesystem (/dev/shm)',
    unavailable: async () => ((await import('node:fs')).existsSync('/dev/shm') ? undefined : 'no /dev/shm'),
    open: () => {
      const dir = path.join('/dev/shm', `shardflow-packed-${process.pid}-${n++}`);
      return { objects: new DirectoryObjects(dir), cleanup: () => rm(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 's3 (the local S3 server)',
    unavailable: s3Unavailable,
    open: () => ({ objects: new S3Objects(S3_BUCKET, `test/packed-${process.pid}-${randomBytes(4).toString('hex')}`, s3ConnectionFromEnv(s3Env())), cleanup: async () => undefined }),
  },
];

async function contentOf(checkpoints: IncrementalCheckpointStore, key: string, sequence: number): Promise<string[]> {
  const dir = fresh('restored');
  await checkpoints.restore(key, dir, { sequence });
  const s = await Store.open({ path: dir, columnFamilies: walColumnFamilies });
  try {
    return await walContents(s);
  } finally {
    await s.close();
  }
}

for (const target of targets) {
  const reason = await target.unavailable();
  describe(`packed chunks: ${target.name}`, { skip: reason ? `unavailable: ${reason}` : false }, () => {
    it('tail puts pack their log bytes into their manifests; restores are exact; a missing holder or a damaged byte is refused with the reason', { timeout: 60_000 }, async () => {
      const { objects, cleanup } = target.open();
      const checkpoints = new IncrementalCheckpointStore(objects);
      const store = await Store.open({ path: fresh('db'), columnFamilies: walColumnFamilies });
      try {
        for (let b = 0; b < 40; b++) await writeWalBatch(store, b);
        assert.equal((await checkpoints.put('k', store, 1)).walTail, false);
        for (let b = 40; b < 60; b++) await writeWalBatch(store, b);
        const second = await checkpoints.put('k', store, 2);
        for (let b = 60; b < 90; b++) await writeWalBatch(store, b);
        const third = await checkpoints.put('k', store, 3);
        assert.equal(second.walTail && third.walTail, true);
        const log = third.manifest.files.find((f) => f.name.endsWith('.log'))!;
        assert.deepEqual(log.chunks?.map((c) => c.in), [undefined, 2, 3], "the log's first chunk an object, then one packed in each tail put's manifest");
        assert.equal(log.link, undefined, 'copied, not linked');
        assert.equal(third.uploadedFiles, 1);
        // The object: the manifest's JSON, a newline, the packed bytes (packedBytes of them),
        // deflated (RFC 1951) when that saves a tenth: a log's keys repeat.
        const raw = (await objects.getBytes(manifestName('k', 3)))!;
        const { manifest, payload, encoding, rawBytes } = decodeManifestAndPayload('k', 3, raw);
        assert.equal(rawBytes, log.chunks![2]!.bytes);
        assert.equal(encoding, 'deflate-raw', 'the batches of the test log compress');
        assert.ok(payload.length < rawBytes * 0.9 && third.uploadedBytes === payload.length, `stored deflated: ${payload.length} of ${rawBytes} bytes`);
        const json = JSON.parse(raw.subarray(0, raw.indexOf(0x0a)).toString('utf8'));
        assert.equal(json.format, 'shardflow-checkpoint/4');
        assert.deepEqual([json.packedEncoding, json.packedRawBytes, json.packedBytes], ['deflate-raw', rawBytes, payload.length]);
        assert.deepEqual(manifest.files, third.manifest.files);
        assert.equal((await checkpoints.latest('k'))?.sequence, 3);

        assert.deepEqual(await contentOf(checkpoints, 'k', 2), expectedAfter(60));
        assert.deepEqual(await contentOf(checkpoints, 'k', 3), expectedAfter(90));

        // A payload whose size is not the JSON's packedBytes: the manifest is damaged.
        assert.throws(() => decodeManifest('k', 3, Buffer.concat([raw, Buffer.from([1])])), (err: Error) => err instanceof CheckpointDamagedError && /packed chunks/.test(err.message));
        // A damaged byte of a packed chunk: refused with the chunk and its manifest.
        const flipped = Buffer.from(raw);
        flipped[flipped.length - 1]! ^= 0xff;
        await objects.putBytes(manifestName('k', 3), flipped);
        await assert.rejects(checkpoints.restore('k', fresh('damaged'), { sequence: 3 }), (err: Error) => err instanceof CheckpointDamagedError && /chunk 3 of 3 \(packed in manifest 3\) has SHA-256|checkpoint k@3 .* is damaged: its packed chunks (do not inflate|inflate to \d+ bytes, the manifest says)/.test(err.message));
        await objects.putBytes(manifestName('k', 3), raw);
        // The manifest holding an earlier chunk gone: refused, naming it.
        await objects.delete([manifestName('k', 2)]);
        await assert.rejects(checkpoints.restore('k', fresh('missing'), { sequence: 3 }), (err: Error) => err instanceof CheckpointDamagedError && /is missing chunk 2 of 3 \(packed in manifest 2\): no such manifest/.test(err.message));
        // The encoder writes exactly what the decoder reads back.
        assert.deepEqual(decodeManifestAndPayload('k', 3, encodeManifest(manifest, [payload], { encoding, rawBytes })).payload, payload);
      } finally {
        await store.close();
        await checkpoints.remove('k');
        await checkpoints.close();
        await cleanup();
      }
    });
  });
}
