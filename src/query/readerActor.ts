import type { Behavior } from '../index.js';
import type { PartitionEnv } from '../actors/partition/env.js';
import { PartitionView } from './partitionView.js';

/** Messages of a partition's reader: `view` replies the incarnation's `PartitionView`. */
export type ReaderMessage = { readonly type: 'view' };

interface ReaderState {
  readonly view: PartitionView;
}

/**
 * The reader of one partition: a child of the partition actor that holds a reference to
 * the partition's store and hands out a read-only `PartitionView` of it. Queries read
 * through the view concurrently, without queueing behind one another in a mailbox; the
 * reader's lifecycle bounds the view's: when it stops or restarts (with its partition),
 * the view closes and the query side asks again.
 */
export function readerActor(env: PartitionEnv): Behavior<ReaderMessage, ReaderState, PartitionView> {
  return {
    kind: 'reader',
    async start() {
      const store = await env.store.acquire();
      return { view: new PartitionView(env.partition, store) };
    },
    receive(state) {
      return state.view;
    },
    async stop(state) {
      state.view.close();
      await env.store.release();
    },
  };
}
