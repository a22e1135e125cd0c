// A warm of a checkpoint into a cache in its own process, so that a test can kill it for real
// at a chosen point:
//
//   node --import tsx test/kit/checkpointWarmChild.ts URL KEY CACHE_DIR N WHEN
//
// Warms KEY's newest checkpoint from the checkpoint store at URL (AWS_* from the environment
// for s3://) into the CheckpointFileCache at CACHE_DIR and SIGKILLs itself at the N-th content
// it adds (N >= 1): WHEN `before` (the content fetched and checked into its temporary file, not
// renamed in) or `after` (renamed in). No finally block, no cleanup.
import { CheckpointFileCache, openCheckpointStore } from '../../src/storage/index.js';

const [url, key, cacheDir, n, when] = process.argv.slice(2);
if (!url || !key || !cacheDir || !n || (when !== 'before' && when !== 'after')) {
  console.error('usage: checkpointWarmChild.ts URL KEY CACHE_DIR N before|after');
  process.exit(2);
}
let added = 0;
class KillingCache extends CheckpointFileCache {
  override async add(sha256: string, content: { readonly bytes: Uint8Array } | { readonly from: string }): Promise<void> {
    const mine = ++added; // up to four contents are added at once
    if (mine === Number(n) && when === 'before') process.kill(process.pid, 'SIGKILL');
    await super.add(sha256, content);
    if (mine === Number(n) && when === 'after') process.kill(process.pid, 'SIGKILL');
  }
}
const checkpoints = openCheckpointStore(url);
const r = await checkpoints.warm(key, new KillingCache(cacheDir));
console.error(`the warm finished after ${added} contents (${r?.fetchedFiles} fetched): it should have been killed at the ${n}th`);
process.exit(3);
