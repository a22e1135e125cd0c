// shardflow/write_batch.h: column-family references that write batches can keep.
//
// Meaning: a write batch (rocksdb::WriteBatch) records puts, merges, deletes and range
// deletes on several column families and is applied atomically by Store::Write(). A
// batch names a column family by its numeric id. RocksDB's ColumnFamilyHandle dies with
// the database, so a batch built from a handle could dangle after close. ColumnFamilyRef
// is a handle-shaped value (id, name, bytewise comparator) owned by the Store object; it
// is only ever used to *record* operations in a batch, never to reach the database.
//
// Threading: a ColumnFamilyRef is immutable and may be read from any thread. A
// rocksdb::WriteBatch is not thread-safe; the binding touches each batch from the JS
// thread only and hands Store::Write() a private copy.
// Lifetimes: refs live as long as the Store object (shared_ptr), which every batch holds.
#ifndef SHARDFLOW_WRITE_BATCH_H_
#define SHARDFLOW_WRITE_BATCH_H_

#include <cstdint>
#include <string>

#include <rocksdb/db.h>

namespace shardflow {

struct ColumnFamilyRef final : public rocksdb::ColumnFamilyHandle {
  ColumnFamilyRef(std::string name, uint32_t id, bool insert_hint = false)
      : name_(std::move(name)), id_(id), insert_hint_(insert_hint) {}
  const std::string& GetName() const override { return name_; }
  uint32_t GetID() const override { return id_; }
  rocksdb::Status GetDescriptor(rocksdb::ColumnFamilyDescriptor*) override {
    return rocksdb::Status::NotSupported("shardflow::ColumnFamilyRef has no descriptor");
  }
  const rocksdb::Comparator* GetComparator() const override {
    return rocksdb::BytewiseComparator();
  }
  // False for a family opened with memtable insert hints: RocksDB 7.8 shares the hint with
  // range tombstones and corrupts the skip list (see MakeColumnFamilyOptions).
  bool TakesRangeDeletes() const { return !insert_hint_; }

 private:
  std::string name_;
  uint32_t id_;
  bool insert_hint_;
};

}  // namespace shardflow

#endif  // SHARDFLOW_WRITE_BATCH_H_
