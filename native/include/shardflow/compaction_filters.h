// shardflow/compaction_filters.h: native compaction filters, declared from TypeScript.
//
// Meaning: RocksDB offers every key/value pair it rewrites during compaction to the
// column family's filter, which may drop it. Filters only see full values (kValue
// entries); merge operands are kept untouched (a dropped operand would change a sum), and
// a value that a later merge folds into stays until the merged result is compacted.
//
//   kind            drops a value when
//   ttl             msgpack record whose `field` (ms since epoch, int or float) is older
//                   than now - ttl_ms. Values that are not maps or lack the field stay.
//   tombstones      lww-format value (8-byte LE int64 timestamp + payload) whose payload
//                   is empty (a tombstone) and whose timestamp is older than now - grace_ms
//   drop_prefixes   the key starts with one of `prefixes`
//
// "now" is the wall clock (rocksdb SystemClock) read at each call, in ms.
//
// Snapshots: RocksDB (>= 6.0) ignores snapshots for compaction filters: a value a filter
// drops disappears for live snapshots too. A snapshot taken for a consistent read across
// column families can therefore miss expired / tombstoned / dropped-prefix data that a
// compaction removed meanwhile; those are exactly the values meant to vanish.
// Errors: a value that does not parse is kept (never dropped on doubt) and not counted.
// Threading: one filter instance per column family is called concurrently from several
// compaction threads; filters are stateless apart from atomic counters and never call JS
// or throw (noexcept).
// Lifetimes: the store owns the filter and deletes it after the DB is closed; the counters
// are shared with the store's stats.
#ifndef SHARDFLOW_COMPACTION_FILTERS_H_
#define SHARDFLOW_COMPACTION_FILTERS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardflow/status.h"

namespace rocksdb {
class CompactionFilter;
}

namespace shardflow {

struct FilterCounters {
  std::atomic<uint64_t> examined{0};
  std::atomic<uint64_t> dropped{0};
};

struct CompactionFilterSpec {
  std::string kind;                   // "ttl" | "tombstones" | "drop_prefixes"
  std::string field;                  // ttl: msgpack record field holding the timestamp
  int64_t ttl_ms = 0;                 // ttl
  int64_t grace_ms = 0;               // tombstones
  std::vector<std::string> prefixes;  // drop_prefixes
};

// Makes the filter; unknown kind or bad parameters -> Status::InvalidArgument.
Status CreateCompactionFilter(const CompactionFilterSpec& spec,
                              std::shared_ptr<FilterCounters> counters,
                              std::unique_ptr<rocksdb::CompactionFilter>* out) noexcept;

}  // namespace shardflow

#endif  // SHARDFLOW_COMPACTION_FILTERS_H_
