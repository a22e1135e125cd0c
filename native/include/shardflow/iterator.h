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
}  // namespace rocksdb

namespace shardflow {

class Store;
class Snapshot;

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

 private:
  friend class Store;
  Iterator() = default;
  std::shared_ptr<Store> store_;
  std::shared_ptr<Snapshot> snapshot_;
  IteratorOptions options_;
  std::unique_ptr<rocksdb::Slice> lower_slice_;
  std::unique_ptr<rocksdb::Slice> upper_slice_;
  rocksdb::Iterator* it_ = nullptr;  // null once the store closed it (guarded by store mu_)
  bool started_ = false;
  bool done_ = false;
};

}  // namespace shardflow

#endif  // SHARDFLOW_ITERATOR_H_
