import type { WebIndex } from '../topology/webIndex.js';
import { mergeCrawlGaps, type CrawlGap } from '../query/partitionView.js';

/**
 * What the crawl of a one-process web index has left unfetched, over all its partitions
 * (`PartitionView.crawlGaps`, summed by state and reason), most URLs first.
 * @param examples most URLs listed per group
 * @throws what `WebIndex.view` throws (the index stopped)
 */
export async function crawlGapsOf(index: Pick<WebIndex, 'partitioner' | 'view'>, examples = 3): Promise<CrawlGap[]> {
  const lists: CrawlGap[][] = [];
  for (let p = 0; p < index.partitioner.partitions; p++) lists.push(await (await index.view(p)).crawlGaps(examples));
  return mergeCrawlGaps(lists, examples);
}

/** One line per gap, e.g. `  blocked: 525 URLs, robots.txt unreachable (fetch failed: Headers Timeout Error), e.g. http://a.test/`. */
export function describeCrawlGaps(gaps: readonly CrawlGap[]): string[] {
  return gaps.map((g) => `  ${g.state}: ${g.urls} URL${g.urls === 1 ? '' : 's'}, ${g.reason}${g.examples.length > 0 ? `, e.g. ${g.examples.join(' ')}` : ''}`);
}
