// Turning a non-OK shardflow::Status into the JS error class registered for its kind
// (src/errors.ts: StoreClosedError, StoreIOError, ...). The error gets the message and a
// `status` property with the RocksDB status text. Without registered classes (the addon
// used directly) a plain Error with `code` SF_ERR_STORE_* is made instead.
#ifndef SHARDFLOW_UTIL_ERRORS_H_
#define SHARDFLOW_UTIL_ERRORS_H_

#include <napi.h>

#include "shardflow/status.h"

namespace shardflow::binding {

Napi::Value MakeError(Napi::Env env, const Status& s);
// Throws the error as a pending JS exception and returns undefined (exceptions are off).
Napi::Value ThrowStatus(Napi::Env env, const Status& s);
// A promise already rejected with the error.
Napi::Value RejectedPromise(Napi::Env env, const Status& s);
// setErrorClasses({ closed, corruption, io, busy, unknownMergeOperator,
//                   mergeOperatorMismatch, invalidArgument })
Napi::Value SetErrorClasses(const Napi::CallbackInfo& info);

}  // namespace shardflow::binding

#endif  // SHARDFLOW_UTIL_ERRORS_H_
