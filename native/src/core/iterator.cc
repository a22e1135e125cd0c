// shardflow::Iterator: chunked iteration (shardflow/iterator.h).
#include "shardflow/iterator.h"

#include <limits>

#include <rocksdb/iterator.h>

#include "shardflow/store.h"

namespace shardflow {

Iterator::~Iterator() {
  if (store_) store_->Unregister(this);
}

Status Iterator::NextChunk(uint32_t max_entries, uint64_t max_bytes, Chunk* out) noexcept {
  // it_ is only nulled by Store::Close() or ~Iterator(), neither of which overlaps a
  // chunk (store.h, iterator.h threading notes).
  if (it_ == nullptr) return Status::Closed("store is closed");
  out->keys.clear();
  out->values.clear();
  out->key_offsets.assign(1, 0);
  out->value_offsets.clear();
  if (!options_.keys_only) out->value_offsets.push_back(0);
  if (done_) {
    out->done = true;
    return Status::OK();
  }
  if (!started_) {
    started_ = true;
    if (options_.reverse) {
      it_->SeekToLast();  // honours iterate_upper_bound
    } else {
      it_->SeekToFirst();  // honours iterate_lower_bound
    }
  }
  constexpr uint64_t kMaxOffset = std::numeric_limits<uint32_t>::max();
  uint32_t n = 0;
  while (n < max_entries && it_->Valid()) {
    rocksdb::Slice k = it_->key();
    rocksdb::Slice v = options_.keys_only ? rocksdb::Slice() : it_->value();
    if (out->keys.size() + k.size() > kMaxOffset || out->values.size() + v.size() > kMaxOffset) {
      if (n == 0) return Status::InvalidArgument("entry larger than 4 GiB");
      break;
    }
    out->keys.append(k.data(), k.size());
    out->key_offsets.push_back(static_cast<uint32_t>(out->keys.size()));
    if (!options_.keys_only) {
      out->values.append(v.data(), v.size());
      out->value_offsets.push_back(static_cast<uint32_t>(out->values.size()));
    }
    ++n;
    if (options_.reverse) {
      it_->Prev();
    } else {
      it_->Next();
    }
    if (out->keys.size() + out->values.size() >= max_bytes) break;
  }
  if (!it_->Valid()) {
    rocksdb::Status s = it_->status();
    if (!s.ok()) return Status::FromRocks(s);
    done_ = true;
  }
  out->done = done_;
  return Status::OK();
}

}  // namespace shardflow
