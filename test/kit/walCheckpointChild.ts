// An owner that writes and checkpoints at once, in its own process, so that a test can
// SIGKILL it for real (test/checkpoint.wal-copy.test.ts):
//
//   node --import tsx test/kit/walCheckpointChild.ts URL STORE_DIR KEY [zstd]
//
// Opens (creates) the store at STORE_DIR with `walColumnFamilies` (and a ZSTD-compressed log
// with `zstd`: `StoreOptions.walCompression`) and writes batch after batch
// (test/kit/walCheckpoint.ts) without end; meanwhile it puts a checkpoint under KEY in the
// checkpoint store at URL (AWS_* from the environment for s3://) every 20 ms with
// walBytesForFlush 64 MiB (the WAL copied, never a flush in a test's time), each with metadata `{"completed": n}`: n batches
// were written before the put began, so the checkpoint holds at least those. After each put
// it prints one JSON line on stdout: `{"sequence", "completed", "wal": [{name, bytes}], "walTail"}`
// (walTail: the put stored only the WAL's new bytes, while batches were being written).
import { openCheckpointStore, Store } from '../../src/storage/index.js';
import { walColumnFamilies, writeWalBatch } from './walCheckpoint.js';

const [url, storeDir, key, compression] = process.argv.slice(2);
if (!url || !storeDir || !key || (compression !== undefined && compression !== 'zstd')) {
  console.error('usage: walCheckpointChild.ts URL STORE_DIR KEY [zstd]');
  process.exit(2);
}
const store = await Store.open({ path: storeDir, columnFamilies: walColumnFamilies, walCompression: compression === 'zstd' });
const checkpoints = openCheckpointStore(url);
let completed = 0;
const writing = (async () => {
  for (;;) await writeWalBatch(store, completed).then(() => completed++);
})();
let sequence = 0;
const putting = (async () => {
  for (;;) {
    await new Promise((r) => setTimeout(r, 20));
    const before = completed;
    const put = await checkpoints.put(key, store, ++sequence, { metadata: Buffer.from(JSON.stringify({ completed: before })), walBytesForFlush: 64 * 2 ** 20 });
    const wal = put.manifest.files.filter((f) => f.name.endsWith('.log')).map((f) => ({ name: f.name, bytes: f.bytes }));
    process.stdout.write(`${JSON.stringify({ sequence, completed: before, wal, walTail: put.walTail })}\n`);
  }
})();
await Promise.race([writing, putting]);
console.error('walCheckpointChild: a loop ended, which it never should');
process.exit(3);
