import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rankGraph } from '../src/jobs/rankGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { assertMatchesReference, graphs, memoryLogger, tempDir } from './kit/datasets.js';

const BOM = '\ufeff';

/** Writes `text` to `file`, and `file.xz` next to it (xz from the system, as the datasets are made). */
function writeBoth(file: string, text: string): void {
  writeFileSync(file, text);
  writeFileSync(`${file}.xz`, execFileSync('xz', ['-c', file]));
}

function xzAvailable(): boolean {
  try {
    execFileSync('xz', ['--version']);
    return true;
  } catch {
    return false;
  }
}

test('graph files: a UTF-8 BOM at the start of pages.txt and links.tsv, and at the start of any column, is no part of a URL (plain and .xz)', { skip: xzAvailable() ? false : 'the xz command is needed to write the .xz variants' }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    // A BOM opens both files (as Windows tools write them); a second one starts a line in
    // the middle of links.tsv (two files concatenated) and one starts a target column.
    writeBoth(join(dir, 'pages.txt'), `${BOM}http://a.test/\nhttp://b.test/\n${BOM}http://c.test/\n`);
    writeBoth(join(dir, 'links.tsv'), `${BOM}http://a.test/\thttp://b.test/\r\nhttp://b.test/\t${BOM}http://c.test/\n${BOM}http://c.test/\thttp://a.test/\nhttp://a.test/\thttp://c.test/\n`);
    writeBoth(join(dir, 'scores.tsv'), `${BOM}http://a.test/\t0.5\nhttp://b.test/\t${BOM}0.25\n`);
    for (const xz of ['', '.xz']) {
      const graph = await readGraph(join(dir, `pages.txt${xz}`), join(dir, `links.tsv${xz}`));
      assert.deepEqual(graph.pages, ['http://a.test/', 'http://b.test/', 'http://c.test/'], `pages${xz}: three, none with a BOM`);
      assert.equal(graph.linkCount, 4);
      assert.deepEqual([...graph.links], [
        ['http://a.test/', ['http://b.test/', 'http://c.test/']],
        ['http://b.test/', ['http://c.test/']],
        ['http://c.test/', ['http://a.test/']],
      ]);
      assert.ok(![...graph.pages, ...[...graph.links.values()].flat()].some((u) => u.includes(BOM)), 'no phantom \\ufeff URL');
      assert.deepEqual([...(await readScores(join(dir, `scores.tsv${xz}`)))], [['http://a.test/', 0.5], ['http://b.test/', 0.25]]);
    }
  } finally {
    cleanup();
  }
});

test('rank of polblogs whose pages.txt and links.tsv start with a BOM: every page once, the reference scores within L1 1e-6', { timeout: 300_000 }, async () => {
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  try {
    const pagesFile = join(dir, 'pages.txt');
    const linksFile = join(dir, 'links.tsv');
    writeFileSync(pagesFile, BOM + readFileSync(join(graphs.polblogs, 'pages.txt'), 'utf8'));
    writeFileSync(linksFile, BOM + readFileSync(join(graphs.polblogs, 'links.tsv'), 'utf8'));
    const graph = await readGraph(pagesFile, linksFile);
    const result = await rankGraph({ graph, partitions: 4, dataDir: join(dir, 'data'), broker, weigh: uniformWeights, tolerance: 1e-9, log: memoryLogger().log });
    const reference = await readScores(join(graphs.polblogs, 'pagerank.tsv'));
    // (main once ranked 1490 pages here, one of them `\ufeffhttp://...`, at L1 8.7e-4)
    assert.equal(result.pages, 1489);
    assert.equal(result.outlinks, 18938);
    assert.equal(result.scores.length, reference.size, 'every page ranked once');
    assert.ok(!result.scores.some(([url]) => url.includes(BOM)), 'no phantom \\ufeff page');
    assertMatchesReference(result, reference);
  } finally {
    await broker.close();
    cleanup();
  }
});
