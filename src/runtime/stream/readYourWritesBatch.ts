import type { IndexedWriteBatch, Key, Store, WriteBatch } from '../../storage/index.js';

/** An operation recorded while the batch is plain, to replay into an indexed one. */
type Op =
  | readonly [kind: 'put', cf: string, key: Key, value: Uint8Array]
  | readonly [kind: 'merge', cf: string, key: Key, operand: Uint8Array]
  | readonly [kind: 'delete', cf: string, key: Key];

/**
 * The write batch of one stage batch, read-your-writes on demand: it records into a plain
 * RocksDB write batch (and a list of the operations, a reference each) until a handler first
 * reads, then replays them, with the open save points, into an `IndexedWriteBatch`
 * (WriteBatchWithIndex) that every later write and read goes to. A stage whose handlers never
 * read so pays no index insert per operation (about 1.3x the CPU of a plain record,
 * `npm run bench -- storage`, `indexedBatch`), and one that reads gets the same answers as with
 * an indexed batch from the start (`indexed: true`, which skips the replay: a stage partition
 * that read in one batch starts the next ones indexed).
 */
export class ReadYourWritesBatch {
  #plain: WriteBatch | undefined;
  #indexed: IndexedWriteBatch | undefined;
  #ops: Op[] = [];
  /** Length of `#ops` at each open save point, oldest first (plain mode). */
  #savePoints: number[] = [];

  constructor(
    readonly store: Store,
    indexed: boolean,
  ) {
    if (indexed) this.#indexed = store.indexedBatch();
    else this.#plain = store.batch();
  }

  /** Whether reads made it indexed (or it was from the start). */
  get indexed(): boolean {
    return this.#indexed !== undefined;
  }

  /** The RocksDB batch to commit (and to add rows no handler reads, after the handlers ran). */
  get batch(): WriteBatch {
    return this.#indexed ?? this.#plain!;
  }

  put(cf: string, key: Key, value: Uint8Array): void {
    if (this.#indexed) this.#indexed.put(cf, key, value);
    else {
      this.#plain!.put(cf, key, value);
      this.#ops.push(['put', cf, key, value]);
    }
  }

  merge(cf: string, key: Key, operand: Uint8Array): void {
    if (this.#indexed) this.#indexed.merge(cf, key, operand);
    else {
      this.#plain!.merge(cf, key, operand);
      this.#ops.push(['merge', cf, key, operand]);
    }
  }

  delete(cf: string, key: Key): void {
    if (this.#indexed) this.#indexed.delete(cf, key);
    else {
      this.#plain!.delete(cf, key);
      this.#ops.push(['delete', cf, key]);
    }
  }

  setSavePoint(): void {
    this.batch.setSavePoint();
    if (!this.#indexed) this.#savePoints.push(this.#ops.length);
  }

  rollbackToSavePoint(): void {
    this.batch.rollbackToSavePoint();
    if (!this.#indexed) this.#ops.length = this.#savePoints.pop()!;
  }

  popSavePoint(): void {
    this.batch.popSavePoint();
    if (!this.#indexed) this.#savePoints.pop();
  }

  /**
   * The indexed batch, for a read: on the first read of a plain batch, a new indexed batch
   * gets every operation recorded so far and the open save points, in order.
   * @throws the store's errors (nothing changes then)
   */
  readable(): IndexedWriteBatch {
    if (this.#indexed) return this.#indexed;
    const indexed = this.store.indexedBatch();
    let sp = 0;
    for (let i = 0; i < this.#ops.length; i++) {
      while (sp < this.#savePoints.length && this.#savePoints[sp] === i) {
        indexed.setSavePoint();
        sp++;
      }
      const op = this.#ops[i]!;
      if (op[0] === 'put') indexed.put(op[1], op[2], op[3]);
      else if (op[0] === 'merge') indexed.merge(op[1], op[2], op[3]);
      else indexed.delete(op[1], op[2]);
    }
    for (; sp < this.#savePoints.length; sp++) indexed.setSavePoint();
    this.#indexed = indexed;
    this.#plain = undefined;
    this.#ops = [];
    this.#savePoints = [];
    return indexed;
  }
}
