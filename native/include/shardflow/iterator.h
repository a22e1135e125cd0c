// shardflow/iterator.h: chunked, bounded iteration over one column family.
//
// Meaning: an Iterator walks keys in bytewise order (or reverse) between an inclusive
// lower bound and an exclusive upper bound, and hands them out a chunk at a time: all
// keys of a chunk in one contiguous buffer with offsets, all values in another. One
// chunk is one trip from JS to the thread pool, so per-entry cost stays near a memcpy.
// The JS layer turns gt/gte/lt/lte/prefix into the two bounds.
//
// Threading: one Iterator may be used by one thread at a time (the binding allows one
// chunk in flight); different iterators may run concurrently.
// Lifetimes: holds a reference to its Store object (and snapshot, if any). When the store
// closes, the underlying RocksDB iterator is deleted and NextChunk() returns
// Status::Closed. Without a snapshot, the iterator reads the implicit snapshot taken when
// it was created (RocksDB semantics): later writes are not seen.
//
// With an IndexedBatch (shardflow/indexed_batch.h), the iterator walks the batch's entries
// of its column family on top of the database's (RocksDB's NewIteratorWithBase: a put or
// merge in the batch shows, a delete hides, merges are resolved with the family's merge
// operator), both as they were when the iterator was made: the database through a snapshot
// (taken then unless one is given), the batch through copy on write. RocksDB 7.8's
// base-delta iterator applies iterate_upper_bound to the batch only once the database side
// is exhausted and ignores the lower bound on the batch side, so this iterator seeks to its
// bounds and checks every key against them itself.
#ifndef SHARDFLOW_ITERATOR_H_
#define SHARDFLOW_ITERATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shardflow/status.h"

namespace rocksdb {
class Iterator;
class Slice;
struct ReadOptions;
class WriteBatchWithIndex;
}  // namespace rocksdb

namespace shardflow {

class Store;
class Snapshot;
class IndexedBatch;

struct IteratorOptions {
  std::optional<std::string> lower;  // inclusive
  std::optional<std::string> upper;  // exclusive
  bool reverse = false;
  bool keys_only = false;
};

// keys of entry i are keys[key_offsets[i], key_offsets[i+1]); likewise values.
struct Chunk {
  std::string keys;
  std::string values;
  std::vector<uint32_t> key_offsets;    // size n + 1
  std::vector<uint32_t> value_offsets;  // size n + 1, or empty when keys_only
  bool done = false;                    // no entries after this chunk
};

class Iterator {
 public:
  ~Iterator();
  // Up to max_entries entries, stopping early once max_bytes of keys+values are held.
  Status NextChunk(uint32_t max_entries, uint64_t max_bytes, Chunk* out) noexcept;
  // The batch whose own index this iterator reads (a chunk of it is a read of the batch,
  // see IndexedBatch::BeginRead), or null: no batch, or reading a private copy by now.
  const std::shared_ptr<IndexedBatch>& reading_batch() const noexcept { return batch_; }

 private:
  friend class Store;
  friend class IndexedBatch;
  Iterator();
  // Copy on write (IndexedBatch::PrepareChange, no chunk in flight): copies the batch's
  // entries this iterator can still reach (within its bounds, past the last key it returned)
  // into a private index, drops the RocksDB iterator and makes it again at the next chunk.
  void Detach() noexcept;
  // Positions it_ at the first entry to return: the start of the range, or the entry after
  // last_key_ once it_ was made again.
  void Position() noexcept;
  // False for a key outside [lower, upper) (the batch side of a base-delta iterator).
  bool InRange(const rocksdb::Slice& key) const noexcept;

  std::shared_ptr<Store> store_;
  std::shared_ptr<Snapshot> snapshot_;
  IteratorOptions options_;
  int cf_ = 0;
  std::unique_ptr<rocksdb::ReadOptions> read_options_;  // kept: base-delta iterators point to it
  std::unique_ptr<rocksdb::Slice> lower_slice_;
  std::unique_ptr<rocksdb::Slice> upper_slice_;
  rocksdb::Iterator* it_ = nullptr;  // null once the store closed it (guarded by store mu_)
  // With a batch: the index read (the batch's own, or a private copy after Detach), the
  // batch while it is the batch's own, and where to go on after it_ is made again.
  std::shared_ptr<rocksdb::WriteBatchWithIndex> delta_;
  std::shared_ptr<IndexedBatch> batch_;
  bool rebuild_ = false;
  std::string last_key_;
  bool has_last_ = false;
  bool started_ = false;
  bool done_ = false;
};

}  // namespace shardflow

#endif  // SHARDFLOW_ITERATOR_H_
