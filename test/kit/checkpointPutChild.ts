// A checkpoint put in its own process, so that a test can kill it for real in the middle:
//
//   node --import tsx test/kit/checkpointPutChild.ts URL STORE_DIR KEY SEQUENCE
//
// Opens the store at STORE_DIR (column families `pages` and `ranks`, as the checkpoint
// conformance test writes them) and puts it under KEY with SEQUENCE in the checkpoint store
// at URL (AWS_* from the environment for s3://). Right after the first file is stored it
// SIGKILLs itself: no finally block, no cleanup, the manifest never written.
import { float64Add } from '../../src/operators/mergeOperators.js';
import { openCheckpointStore, Store } from '../../src/storage/index.js';

const [url, storeDir, key, sequence] = process.argv.slice(2);
if (!url || !storeDir || !key || !sequence) {
  console.error('usage: checkpointPutChild.ts URL STORE_DIR KEY SEQUENCE');
  process.exit(2);
}
const store = await Store.open({ path: storeDir, columnFamilies: { pages: {}, ranks: { mergeOperator: float64Add() } } });
const checkpoints = openCheckpointStore(url);
await checkpoints.put(key, store, Number(sequence), {
  onProgress: (e) => {
    if (e.kind === 'uploaded') process.kill(process.pid, 'SIGKILL');
  },
});
console.error('the put finished: it should have been killed after its first file');
process.exit(3);
