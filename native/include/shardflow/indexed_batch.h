// shardflow/indexed_batch.h: a write batch that its writer can read (read-your-writes).
//
// Meaning: an IndexedBatch is a rocksdb::WriteBatchWithIndex (bytewise index,
// overwrite_key = true, which NewIteratorWithBase requires): what is recorded in it is
// applied by Store::Write() like a plain write batch, and is also indexed per column
// family, so that Store::GetFromBatch() (RocksDB's GetFromBatchAndDB) and an Iterator made
// with the batch (RocksDB's NewIteratorWithBase over a database iterator) read the
// database with the batch on top. Merge operands in the batch are resolved with the column
// family's merge operator, over the database's value, by both the point read and the
// iterator (RocksDB 7.8's BaseDeltaIterator::value() merges them; tested in
// test/storage.indexed-batch.test.ts). RocksDB 7.8 does not index range deletes
// (WriteBatchWithIndex::DeleteRange returns NotSupported), so an IndexedBatch takes none.
//
// Reads and changes: a read runs on a pool thread (it may reach the database), so the batch
// must not change while one is in flight: the owner brackets each read with BeginRead() /
// EndRead(), and PrepareChange() returns Status::Busy while any is in flight. An iterator
// reads the batch as it was when the iterator was made (like a database iterator's implicit
// snapshot): PrepareChange() first gives every iterator still reading the batch's own index
// a private copy of the entries it can still reach (copy on write), so that writing while
// iterating is exact whatever the chunk size, and costs nothing when nothing iterates.
//
// Threading: one owner thread (the binding's JS thread) records, calls PrepareChange(),
// BeginRead() and EndRead(), and makes and destroys the iterators; reads run on pool threads
// under the rule above. Lifetimes: shared by the binding's batch, its read workers and its
// iterators (an iterator keeps the batch alive while it reads the batch's index).
#ifndef SHARDFLOW_INDEXED_BATCH_H_
#define SHARDFLOW_INDEXED_BATCH_H_

#include <memory>
#include <unordered_set>

#include <rocksdb/utilities/write_batch_with_index.h>

#include "shardflow/status.h"

namespace shardflow {

class Iterator;

class IndexedBatch {
 public:
  IndexedBatch();
  ~IndexedBatch();
  IndexedBatch(const IndexedBatch&) = delete;
  IndexedBatch& operator=(const IndexedBatch&) = delete;

  // What the owner records into (Put, Merge, Delete, save points; never DeleteRange).
  rocksdb::WriteBatchWithIndex* wbwi() const noexcept { return wbwi_.get(); }

  // Call before anything that changes the recorded operations (a record, a rollback to a
  // save point, Clear, TakeInto). Busy while a read is in flight (nothing is changed then);
  // otherwise detaches every iterator reading the live index (see above) and returns OK.
  Status PrepareChange() noexcept;

  // A read of the batch (point read or iterator chunk) begins / ends. Owner thread.
  void BeginRead() noexcept { ++reads_; }
  void EndRead() noexcept { --reads_; }

  // Moves the recorded operations into *out (no copy) and leaves the batch empty, index
  // included. Call PrepareChange() first.
  void TakeInto(rocksdb::WriteBatch* out) noexcept;

 private:
  friend class Iterator;
  friend class Store;
  std::shared_ptr<rocksdb::WriteBatchWithIndex> wbwi_;
  std::unordered_set<Iterator*> iterators_;  // reading wbwi_ itself (not a private copy)
  int reads_ = 0;
};

}  // namespace shardflow

#endif  // SHARDFLOW_INDEXED_BATCH_H_
