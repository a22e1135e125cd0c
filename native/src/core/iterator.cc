// shardflow::Iterator: chunked iteration (shardflow/iterator.h), with or without a batch.
#include "shardflow/iterator.h"

#include <limits>

#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/utilities/write_batch_with_index.h>

#include "shardflow/indexed_batch.h"
#include "shardflow/store.h"
#include "shardflow/write_batch.h"

namespace shardflow {

Iterator::Iterator() : read_options_(std::make_unique<rocksdb::ReadOptions>()) {}

Iterator::~Iterator() {
  if (batch_) batch_->iterators_.erase(this);
  if (store_) store_->Unregister(this);
}

bool Iterator::InRange(const rocksdb::Slice& key) const noexcept {
  if (lower_slice_ && key.compare(*lower_slice_) < 0) return false;
  if (upper_slice_ && key.compare(*upper_slice_) >= 0) return false;
  return true;
}

void Iterator::Position() noexcept {
  if (has_last_) {
    const rocksdb::Slice last(last_key_);
    if (options_.reverse) {
      it_->SeekForPrev(last);
      if (it_->Valid() && it_->key() == last) it_->Prev();
    } else {
      it_->Seek(last);
      if (it_->Valid() && it_->key() == last) it_->Next();
    }
    return;
  }
  if (!delta_) {
    // A database iterator honours both bounds itself.
    if (options_.reverse) {
      it_->SeekToLast();
    } else {
      it_->SeekToFirst();
    }
    return;
  }
  // A base-delta iterator's SeekToFirst / SeekToLast start the batch side at the ends of the
  // whole column family: seek to the bounds instead.
  if (options_.reverse) {
    if (upper_slice_) {
      it_->SeekForPrev(*upper_slice_);
      while (it_->Valid() && it_->key().compare(*upper_slice_) >= 0) it_->Prev();
    } else {
      it_->SeekToLast();
    }
  } else if (lower_slice_) {
    it_->Seek(*lower_slice_);
  } else {
    it_->SeekToFirst();
  }
}

void Iterator::Detach() noexcept {
  if (!done_) {
    auto copy = std::make_shared<rocksdb::WriteBatchWithIndex>(rocksdb::BytewiseComparator(), 0,
                                                               /*overwrite_key=*/true);
    auto* ref = const_cast<ColumnFamilyRef*>(store_->Ref(cf_));
    std::unique_ptr<rocksdb::WBWIIterator> w(delta_->NewIterator(ref));
    const rocksdb::Slice last(last_key_);
    if (has_last_ && !options_.reverse) {
      w->Seek(last);
    } else if (lower_slice_) {
      w->Seek(*lower_slice_);
    } else {
      w->SeekToFirst();
    }
    // Entries of one key come in the order they were recorded: copying them in that order
    // gives the same latest put or delete and the same merges after it.
    for (; w->Valid(); w->Next()) {
      const rocksdb::WriteEntry e = w->Entry();
      if (upper_slice_ && e.key.compare(*upper_slice_) >= 0) break;
      if (has_last_ && options_.reverse && e.key.compare(last) > 0) break;
      switch (e.type) {
        case rocksdb::kPutRecord: copy->Put(ref, e.key, e.value); break;
        case rocksdb::kMergeRecord: copy->Merge(ref, e.key, e.value); break;
        case rocksdb::kDeleteRecord: copy->Delete(ref, e.key); break;
        case rocksdb::kSingleDeleteRecord: copy->SingleDelete(ref, e.key); break;
        default: break;  // log data and transaction markers carry no entry
      }
    }
    delta_ = std::move(copy);
    rebuild_ = true;
  }
  store_->DropRocksIterator(this);
  batch_.reset();
}

Status Iterator::NextChunk(uint32_t max_entries, uint64_t max_bytes, Chunk* out) noexcept {
  out->keys.clear();
  out->values.clear();
  out->key_offsets.assign(1, 0);
  out->value_offsets.clear();
  if (!options_.keys_only) out->value_offsets.push_back(0);
  if (done_) {
    out->done = true;
    return Status::OK();
  }
  if (rebuild_) {
    Status s = store_->RemakeRocksIterator(this);
    if (!s.ok()) return s;
    if (started_) Position();
  }
  // it_ is only nulled by Store::Close(), Detach() or ~Iterator(), none of which overlaps a
  // chunk (store.h, iterator.h and indexed_batch.h threading notes).
  if (it_ == nullptr) return Status::Closed("store is closed");
  if (!started_) {
    started_ = true;
    Position();
  }
  constexpr uint64_t kMaxOffset = std::numeric_limits<uint32_t>::max();
  uint32_t n = 0;
  bool past_bounds = false;
  while (n < max_entries && it_->Valid()) {
    rocksdb::Slice k = it_->key();
    if (delta_ && !InRange(k)) {
      past_bounds = true;  // keys only move further out from here
      break;
    }
    rocksdb::Slice v = options_.keys_only ? rocksdb::Slice() : it_->value();
    if (delta_ && !options_.keys_only) {
      rocksdb::Status ms = it_->status();  // a merge of batch operands failed
      if (!ms.ok()) return Status::FromRocks(ms);
    }
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
  if (delta_ && n > 0) {
    // Where to go on if the batch changes before the next chunk (Detach).
    last_key_.assign(out->keys, out->key_offsets[n - 1], out->key_offsets[n] - out->key_offsets[n - 1]);
    has_last_ = true;
  }
  if (past_bounds || !it_->Valid()) {
    rocksdb::Status s = it_->status();
    if (!s.ok()) return Status::FromRocks(s);
    done_ = true;
  }
  out->done = done_;
  return Status::OK();
}

}  // namespace shardflow
