import { join } from 'node:path';
import { readGraph } from '../../src/replay/graphFile.js';
import { uniformWeights } from '../../src/actors/metrics/weights.js';
import { MemoryBroker } from '../../src/runtime/brokers/memory.js';
import { startWebIndex, type WebIndex } from '../../src/topology/webIndex.js';
import { graphPages, publishFetches } from '../../src/jobs/graphLoader.js';
import { memoryLogger, tempDir } from './datasets.js';

/**
 * Runs `body` on a one-process web index over a MemoryBroker in a temporary data dir, with
 * `partitions` partitions and uniform weights, once the graph of folder `graphDir`
 * (`pages.txt`, `links.tsv`) went through the pipeline and the index is quiet; then stops
 * it, closes the broker and removes the data dir (also when `body` throws).
 */
export async function withLoadedWebIndex(graphDir: string, partitions: number, body: (index: WebIndex) => Promise<void>): Promise<void> {
  const graph = await readGraph(join(graphDir, 'pages.txt'), join(graphDir, 'links.tsv'));
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const index = await startWebIndex({ partitions, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log });
  try {
    await publishFetches(index.broker, index.partitioner, index.counters, graphPages(graph));
    await index.quiescence({ pollMs: 10 });
    await body(index);
  } finally {
    await index.stop();
    await broker.close();
    cleanup();
  }
}
