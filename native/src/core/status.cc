// Mapping of RocksDB statuses onto shardflow::Status kinds.
#include "shardflow/status.h"

#include <rocksdb/status.h>

namespace shardflow {

Status Status::FromRocks(const rocksdb::Status& s) noexcept {
  if (s.ok()) return Status::OK();
  std::string text = s.ToString();
  if (s.IsCorruption()) return Corruption(std::move(text));
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return Busy(std::move(text));
  if (s.IsIOError()) {
    // Another handle (this process or another) holds the LOCK file.
    if (text.find("lock") != std::string::npos || text.find("LOCK") != std::string::npos) {
      return Busy(std::move(text));
    }
    return IOError(std::move(text));
  }
  if (s.IsInvalidArgument() || s.IsNotSupported()) return InvalidArgument(std::move(text));
  return IOError(std::move(text));
}

}  // namespace shardflow
