/**
 * A child process writes synced batches and reports each one as soon as its promise
 * resolves; the parent SIGKILLs it right after a report. On reopen every reported batch
 * must be there, whole (atomic), and nothing may be doubled.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { decodeInt64, int64Add } from '../src/operators/mergeOperators.js';
import { Store } from '../src/storage/index.js';

const storageModule = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/storage/index.ts');
const operatorsModule = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/operators/mergeOperators.ts');
const columnFamilies = { data: {}, counts: { mergeOperator: int64Add() } };

// Writes batches forever: put data/<run>/<i>, merge counts/n += 1; prints i once synced.
const child = (dbPath: string, run: number) => `
  import { Store } from ${JSON.stringify(storageModule)};
  import { encodeInt64, int64Add } from ${JSON.stringify(operatorsModule)};
  const store = await Store.open({ path: ${JSON.stringify(dbPath)}, columnFamilies: { data: {}, counts: { mergeOperator: int64Add() } } });
  for (let i = 0; ; i++) {
    const batch = store.batch().put('data', '${run}/' + String(i).padStart(6, '0'), Buffer.alloc(64, i % 256)).merge('counts', 'n', encodeInt64(1));
    await store.write(batch, { sync: true });
    process.stdout.write(i + '\\n');
  }
`;

let dir: string;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-crash-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function killAfter(dbPath: string, run: number, acks: number): Promise<number> {
  const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', child(dbPath, run)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.on('exit', (_code, signal) => resolve(signal)));
  let last = -1;
  for await (const line of createInterface({ input: proc.stdout })) {
    last = Number(line);
    if (last + 1 >= acks) {
      proc.kill('SIGKILL');
      break;
    }
  }
  assert.equal(await exited, 'SIGKILL');
  return last;
}

describe('crash durability', () => {
  it('keeps every synced batch, whole and once, after SIGKILL, across repeated crashes', async () => {
    const dbPath = path.join(dir, 'db');
    const runs = [50, 20, 1];
    const acknowledged: string[] = [];
    for (let run = 0; run < runs.length; run++) {
      const last = await killAfter(dbPath, run, runs[run]!);
      assert.ok(last >= 0, 'the child acknowledged nothing');
      for (let i = 0; i <= last; i++) acknowledged.push(`${run}/${String(i).padStart(6, '0')}`);
      const store = await Store.open({ path: dbPath, columnFamilies });
      const keys = new Set<string>();
      for await (const { keys: ks } of store.chunks('data', { keysOnly: true })) for (const k of ks) keys.add(String(k));
      for (const k of acknowledged) assert.ok(keys.has(k), `acknowledged batch ${k} lost`);
      // Every batch put one key and merged +1: equal counts mean no batch was torn or doubled.
      assert.equal(decodeInt64((await store.get('counts', 'n'))!), BigInt(keys.size));
      await store.close();
    }
  });
});
