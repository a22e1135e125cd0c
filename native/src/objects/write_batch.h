// WriteBatchWrap: a rocksdb::WriteBatch built on the JS thread (sync calls, no copies of
// Uint8Array arguments beyond the batch's own buffer), bound to the store it was made
// for: `new WriteBatch(store)`. Column families are given by index. The batch records
// through ColumnFamilyRef (shardflow/write_batch.h), so it stays valid after the store
// closes; writing it then fails with StoreClosedError. JS thread only.
//
// `new WriteBatch(store, true)` makes an indexed batch (shardflow/indexed_batch.h) that
// also reads: get(cf, key, snapshot?) -> Promise<Buffer | undefined> and iterator(cf,
// options) -> Iterator see the batch on top of the store. Every change (a record, clear,
// rollbackToSavePoint, a write that takes it) throws StoreBusyError while one of its reads
// is in flight, and deleteRange throws InvalidArgumentError (RocksDB 7.8 indexes none).
// Save points (setSavePoint, rollbackToSavePoint, popSavePoint) work on both kinds.
#ifndef SHARDFLOW_OBJECTS_WRITE_BATCH_H_
#define SHARDFLOW_OBJECTS_WRITE_BATCH_H_

#include <napi.h>

#include <memory>

#include <rocksdb/write_batch.h>

#include "shardflow/indexed_batch.h"
#include "shardflow/store.h"

namespace shardflow::binding {

class StoreWrap;

class WriteBatchWrap : public Napi::ObjectWrap<WriteBatchWrap> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit WriteBatchWrap(const Napi::CallbackInfo& info);
  // Null when `value` is not a WriteBatchWrap.
  static WriteBatchWrap* FromValue(Napi::Value value);
  // Moves the recorded operations into *out (for a write) and leaves this batch empty;
  // Busy (nothing moved) while a read of an indexed batch is in flight.
  Status Take(Napi::Env env, rocksdb::WriteBatch* out);
  const Store* store() const { return store_.get(); }

 private:
  Napi::Value Put(const Napi::CallbackInfo& info);
  Napi::Value Merge(const Napi::CallbackInfo& info);
  // mergeMany(cf, keys[], operands[] | operand): many merges in one call.
  Napi::Value MergeMany(const Napi::CallbackInfo& info);
  // putPairs(cf, firsts[] | first, seconds[] | second, values[] | value): many puts in one
  // call, key i = first_i 0x00 second_i (two-part keys, built by RocksDB from slice parts).
  Napi::Value PutPairs(const Napi::CallbackInfo& info);
  // putPairsJoined(cf, n, first, firstJoined, second, secondJoined, values[], valueIndex):
  // putPairs with each part either shared or n strings joined by 0x00 in one JS string, and
  // values[valueIndex[i]] for put i: no N-API call per put. Optional merge (merges instead
  // of puts) and keyOrder (recorded in key order, a stable sort) flags.
  Napi::Value PutPairsJoined(const Napi::CallbackInfo& info);
  // mergeFloat64s(cf, keys[], values: Float64Array, stride): key i gets the operand
  // values[i*stride .. (i+1)*stride) as LE float64 (shardflow.float64_add.v1 layout).
  Napi::Value MergeFloat64s(const Napi::CallbackInfo& info);
  Napi::Value MergeFloat64sPacked(const Napi::CallbackInfo& info);
  // mergePairRuns(cf, columns, lastPerKey, keyOrder): merges into two-part keys from packed
  // columns in runs that share their second part and operand (write_batch.cc).
  Napi::Value MergePairRuns(const Napi::CallbackInfo& info);
  Napi::Value Delete(const Napi::CallbackInfo& info);
  Napi::Value DeleteRange(const Napi::CallbackInfo& info);
  Napi::Value Clear(const Napi::CallbackInfo& info);
  Napi::Value Count(const Napi::CallbackInfo& info);
  Napi::Value ByteSize(const Napi::CallbackInfo& info);
  Napi::Value SetSavePoint(const Napi::CallbackInfo& info);
  Napi::Value RollbackToSavePoint(const Napi::CallbackInfo& info);
  Napi::Value PopSavePoint(const Napi::CallbackInfo& info);
  // Indexed batches only (write_batch_reads.cc).
  Napi::Value Get(const Napi::CallbackInfo& info);
  Napi::Value NewIterator(const Napi::CallbackInfo& info);
  // Indexed batches: the store is open and cf a column family, else throws / rejects.
  bool CheckReadable(Napi::Env env, Napi::Value cf_arg, int* cf, Status* error);
  const ColumnFamilyRef* CfArg(const Napi::CallbackInfo& info);
  // Before a change: true for a plain batch; for an indexed one, IndexedBatch::PrepareChange
  // (false, thrown, while a read is in flight).
  bool Changeable(Napi::Env env);
  Napi::Value Check(Napi::Env env, const rocksdb::Status& s);
  // Tells V8 how much native memory this batch holds (in 64 KiB steps), so that dropped
  // batches of many MiB get collected soon rather than piling up between GCs (they did in
  // bench/storage.ts: 64 stores x 500 KiB batches per round).
  void ReportMemory(Napi::Env env);
  // Runs record(cf, i) for i in [0, n) inside a save point: the first non-OK Status rolls
  // the batch back to where the call started and is thrown (all or nothing).
  template <typename Record>
  Napi::Value RecordAll(Napi::Env env, const ColumnFamilyRef* cf, size_t n, Record&& record);
  void Finalize(Napi::Env env) override;
  int64_t reported_ = 0;

  std::shared_ptr<Store> store_;
  rocksdb::WriteBatch batch_;
  std::shared_ptr<IndexedBatch> indexed_;  // null for a plain batch
  rocksdb::WriteBatchBase* rec_ = &batch_;  // what records go to: batch_ or indexed_'s index
  StoreWrap* owner_ = nullptr;              // indexed batches: the store their reads run on
  Napi::ObjectReference owner_ref_;
};

}  // namespace shardflow::binding

#endif  // SHARDFLOW_OBJECTS_WRITE_BATCH_H_
