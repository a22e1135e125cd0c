import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mkdirs, mkdirsSync, writableDirectory } from '../src/storage/mkdirs.js';
import { DirectoryObjects } from '../src/checkpoint/directoryObjects.js';
import { tempDir } from './kit/datasets.js';

/**
 * `mkdirs` is `mkdir -p` that returns on every path. Node's `mkdir(dir, { recursive: true })`
 * spins for ever at 100% CPU under /proc (mkdir answers ENOENT with the parent there): a
 * worker given `--checkpoints file:///proc/x` hung in its file threads, logged nothing and
 * ignored SIGTERM (found by an operator trying the cluster). Now the directory store's first
 * write fails with its directory named, and the unit's start fails with that reason.
 */
test('mkdirs makes missing parents, accepts an existing directory, and fails (never spins) where a directory cannot be', { timeout: 30_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-mkdirs-');
  try {
    await mkdirs(join(dir, 'a', 'b', 'c'));
    assert.ok(statSync(join(dir, 'a', 'b', 'c')).isDirectory());
    await mkdirs(join(dir, 'a', 'b', 'c')); // again: fine
    mkdirsSync(join(dir, 's', 't'));
    assert.ok(statSync(join(dir, 's', 't')).isDirectory());
    writeFileSync(join(dir, 'file'), 'x');
    await assert.rejects(mkdirs(join(dir, 'file')), { code: 'ENOTDIR' });
    await assert.rejects(mkdirs(join(dir, 'file', 'below')), { code: 'ENOTDIR' });
    await writableDirectory(join(dir, 'w'));
    assert.ok(existsSync(join(dir, 'w')));
    if (existsSync('/proc/self')) {
      await assert.rejects(mkdirs('/proc/sf-not-a-dir/deeper'), { code: 'ENOENT' });
      assert.throws(() => mkdirsSync('/proc/sf-not-a-dir/deeper'), { code: 'ENOENT' });
      await assert.rejects(writableDirectory('/proc'), { code: 'ENOENT' });
      const objects = new DirectoryObjects('/proc/sf-checkpoints');
      await assert.rejects(objects.putBytes('k/manifest', Buffer.from('x')), /checkpoint store file:\/\/\/proc\/sf-checkpoints: its directory cannot be created or written \(ENOENT/);
      await objects.close();
    }
  } finally {
    cleanup();
  }
});
