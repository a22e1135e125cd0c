import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { tempDir } from './kit/datasets.js';
import { runCli, seededRandom, type KillPoint } from './kit/cliRun.js';

// `npm run demo -- --graph hollins` killed mid-crawl (SIGKILL, or SIGINT for a clean stop) at
// a seeded metric round of the continuous mode, then the same command on the same --data-dir:
// it must crawl what is left and end exactly like an uninterrupted run (hollins: 6,012 pages,
// 23,875 links and backlinks, L1 <= 1e-6 to the reference).

const random = seededRandom(11);
const points: Array<{ name: string; kill: KillPoint; code?: number }> = [
  { signal: 'SIGKILL' as const, round: 1 + Math.floor(random() * 40) },
  { signal: 'SIGINT' as const, round: 1 + Math.floor(random() * 40) },
].map(({ signal, round }) => ({
  name: `${signal} at metric round ${round} of the crawl`,
  kill: { signal, when: (l: string) => l.includes('"msg":"metric round"') && (JSON.parse(l) as { round: number }).round >= round },
  ...(signal === 'SIGINT' ? { code: 130 } : {}),
}));

describe('demo killed mid-crawl, then run again on its data dir', () => {
  const tmp = tempDir('shardflow-crash-demo-');
  after(() => tmp.cleanup());
  for (const point of points) {
    it(point.name, async () => {
      const dataDir = join(tmp.dir, point.name.replace(/\W+/g, '-'));
      const args = ['demo', '--graph', 'hollins', '--partitions', '8', '--data-dir', dataDir, '--log-level', 'info'];
      const first = await runCli(args, { kill: point.kill });
      assert.ok(first.killed, `the kill point was reached: ${first.stdout.slice(-500)}`);
      if (point.code !== undefined) assert.equal(first.code, point.code, first.stderr.slice(-1000));
      else assert.equal(first.signal, 'SIGKILL');
      const second = await runCli(args);
      assert.equal(second.code, 0, second.stderr.slice(-2000));
      assert.match(second.stderr.split('\n')[0]!, /^data dir .*: existing, 8 partitions, holds crawl .*: \d+ pages, .*; the last run did not stop quiet/);
      assert.match(second.stdout, /pages fetched: +6012\n/);
      assert.match(second.stdout, /links stored: +23875\n/);
      assert.match(second.stdout, /backlinks stored: +23875\n/);
      const l1 = Number(/L1 distance to .*: (\S+)/.exec(second.stdout)?.[1]);
      assert.ok(l1 <= 1e-6, `L1 ${l1}`);
    });
  }
});
