// shardflow::IndexedBatch: a write batch with an index, readable by its writer
// (shardflow/indexed_batch.h).
#include "shardflow/indexed_batch.h"

#include <string>
#include <vector>

#include "shardflow/iterator.h"

namespace shardflow {

IndexedBatch::IndexedBatch()
    : wbwi_(std::make_shared<rocksdb::WriteBatchWithIndex>(rocksdb::BytewiseComparator(), 0,
                                                           /*overwrite_key=*/true)) {}

IndexedBatch::~IndexedBatch() = default;

Status IndexedBatch::PrepareChange() noexcept {
  if (reads_ > 0) {
    return Status::Busy("the batch is being read (" + std::to_string(reads_) +
                        " reads in flight): await its reads before changing it");
  }
  if (!iterators_.empty()) {
    std::vector<Iterator*> reading(iterators_.begin(), iterators_.end());
    iterators_.clear();
    for (Iterator* it : reading) it->Detach();
  }
  return Status::OK();
}

void IndexedBatch::TakeInto(rocksdb::WriteBatch* out) noexcept {
  // Moves the string of records out; Clear() then makes the moved-from batch a valid empty
  // one again (header, no save points) and empties the index.
  *out = std::move(static_cast<rocksdb::WriteBatch&>(*wbwi_->GetWriteBatch()));
  wbwi_->Clear();
}

}  // namespace shardflow
