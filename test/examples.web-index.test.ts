import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { tempDir } from './kit/datasets.js';

/**
 * examples/web-index as CI runs it (`npm run example -- web-index`, polblogs over the memory
 * broker): under `--chaos 0.05`, then again on the same data dir (the crawl and the recrawl
 * sent once more by producer epoch 2 leave the same index). Each run checks every target's
 * backlinks and in-degree against a computation without shardflow and exits 1 on a mismatch
 * or a dead letter. A run killed with SIGKILL leaves its data dir refused with the reason.
 */
const root = fileURLToPath(new URL('..', import.meta.url));

function example(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('npm', ['run', '-s', 'example', '--', 'web-index', ...args], { cwd: root, encoding: 'utf8', timeout: 300_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const summary = /stored (\d+) pages, (\d+) links; \2 backlinks on \d+ targets; partition restarts: \d+; dead letters: 0/;

test('web-index under chaos, then again on its data dir: the same index, equal to the ground truth', { timeout: 600_000 }, () => {
  const { dir, cleanup } = tempDir('sf-webex-');
  try {
    const first = example(['--chaos', '0.05', '--data-dir', dir]);
    assert.equal(first.status, 0, `${first.stdout}\n${first.stderr}`);
    assert.match(first.stdout, /producer crawler epoch 1: sent 1489 pages, then a recrawl of \d+ \(\d+ deleted\) over memory, chaos 0.05/);
    assert.match(first.stdout, summary);
    assert.match(first.stdout, /check: every target's backlinks and in-degree equal the ground truth computed without shardflow/);
    const second = example(['--data-dir', dir]);
    assert.equal(second.status, 0, `${second.stdout}\n${second.stderr}`);
    assert.match(second.stdout, /producer crawler epoch 2: sent 1489 pages/);
    assert.deepEqual(second.stdout.match(summary)?.slice(1), first.stdout.match(summary)?.slice(1)); // pages, links
    assert.match(second.stdout, /check: every target's backlinks and in-degree equal the ground truth/);
  } finally {
    cleanup();
  }
});

test('web-index killed with SIGKILL: the next run on its data dir is refused with the reason', { timeout: 300_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-webex-kill-');
  try {
    // The example's own process (not npm's), killed once it has started its topology.
    const child = spawn(process.execPath, ['--conditions=shardflow-source', '--import', 'tsx', 'examples/web-index/main.ts', '--data-dir', dir], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
    await once(child.stdout, 'data');
    child.kill('SIGKILL');
    const [, signal] = await once(child, 'exit');
    assert.equal(signal, 'SIGKILL');
    const again = example(['--data-dir', dir]);
    assert.equal(again.status, 2, `${again.stdout}\n${again.stderr}`);
    assert.match(again.stderr, /refused: a run on .* did not finish \(killed\?\); link operations it had in flight died with its broker scope/);
  } finally {
    cleanup();
  }
});
