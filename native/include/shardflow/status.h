// shardflow/status.h: the result of a native storage operation.
//
// Meaning: a Status is either OK or carries a Kind (what went wrong, one per JS error
// class) and a message (for RocksDB failures, the RocksDB status text verbatim). Native
// code never throws: every fallible function returns a Status, and only the binding edge
// (native/src/objects) turns a non-OK Status into a typed JS error from src/errors.ts.
//
// Threading: a Status is a plain value; distinct instances may be used from any thread.
// Lifetimes: owns its message; no references to RocksDB objects are kept.
#ifndef SHARDFLOW_STATUS_H_
#define SHARDFLOW_STATUS_H_

#include <string>
#include <utility>

namespace rocksdb {
class Status;
}

namespace shardflow {

class Status {
 public:
  // One Kind per JS error class (see src/errors.ts, codes SF_ERR_STORE_*).
  enum class Kind {
    kOk,
    kClosed,                  // StoreClosedError: the store (or iterator) is closed
    kCorruption,              // StoreCorruptionError: RocksDB reported corruption
    kIOError,                 // StoreIOError: filesystem / RocksDB I/O failure
    kBusy,                    // StoreBusyError: lock held, busy, try again, timed out
    kUnknownMergeOperator,    // UnknownMergeOperatorError: name not in the registry
    kMergeOperatorMismatch,   // MergeOperatorMismatchError: CF was created with another operator
    kInvalidArgument,         // InvalidArgumentError: bad option / argument
  };

  Status() noexcept = default;
  static Status OK() noexcept { return Status(); }
  static Status Closed(std::string msg) noexcept { return Status(Kind::kClosed, std::move(msg)); }
  static Status Corruption(std::string msg) noexcept { return Status(Kind::kCorruption, std::move(msg)); }
  static Status IOError(std::string msg) noexcept { return Status(Kind::kIOError, std::move(msg)); }
  static Status Busy(std::string msg) noexcept { return Status(Kind::kBusy, std::move(msg)); }
  static Status UnknownMergeOperator(std::string msg) noexcept {
    return Status(Kind::kUnknownMergeOperator, std::move(msg));
  }
  static Status MergeOperatorMismatch(std::string msg) noexcept {
    return Status(Kind::kMergeOperatorMismatch, std::move(msg));
  }
  static Status InvalidArgument(std::string msg) noexcept {
    return Status(Kind::kInvalidArgument, std::move(msg));
  }
  // Maps a RocksDB status onto a Kind; the message is rocksdb::Status::ToString().
  // A lock that another handle holds (IOError "lock ...") maps to kBusy.
  static Status FromRocks(const rocksdb::Status& s) noexcept;

  bool ok() const noexcept { return kind_ == Kind::kOk; }
  Kind kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }

 private:
  Status(Kind kind, std::string msg) noexcept : kind_(kind), message_(std::move(msg)) {}
  Kind kind_ = Kind::kOk;
  std::string message_;
};

}  // namespace shardflow

#endif  // SHARDFLOW_STATUS_H_
