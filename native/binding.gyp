# shardflow native addon: node-addon-api over the system RocksDB (librocksdb-dev).
# C++20, exceptions off (NAPI_DISABLE_CPP_EXCEPTIONS; errors travel as Status values and
# pending JS exceptions, see README.md), hidden visibility. Built by scripts/install.mjs.
{
  "targets": [
    {
      "target_name": "shardflow_native",
      "sources": [
        "src/addon.cc",
        "src/core/indexed_batch.cc",
        "src/core/iterator.cc",
        "src/core/resources.cc",
        "src/core/status.cc",
        "src/core/store.cc",
        "src/filters/drop_prefixes.cc",
        "src/filters/registry.cc",
        "src/filters/tombstones.cc",
        "src/filters/ttl.cc",
        "src/merge/float64_add.cc",
        "src/merge/float64_extremum.cc",
        "src/merge/int64_add.cc",
        "src/merge/lww.cc",
        "src/merge/record.cc",
        "src/merge/registry.cc",
        "src/merge/set.cc",
        "src/objects/iterator.cc",
        "src/objects/merge_probe.cc",
        "src/objects/resources.cc",
        "src/objects/snapshot.cc",
        "src/objects/store.cc",
        "src/objects/write_batch.cc",
        "src/objects/write_batch_reads.cc",
        "src/util/errors.cc",
        "src/util/msgpack.cc"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "include",
        "src"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_DISABLE_CPP_EXCEPTIONS"
      ],
      "cflags!": ["-fexceptions"],
      "cflags_cc!": ["-fexceptions", "-std=gnu++17", "-std=c++17", "-fno-rtti"],
      "cflags_cc": ["-std=c++20", "-fno-exceptions", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                     # GCC 12 false positive on std::string concatenation (GCC bug 105329)
                     "-Wno-restrict"],
      "libraries": ["-lrocksdb"],
      "xcode_settings": {
        "GCC_ENABLE_CPP_EXCEPTIONS": "NO",
        "GCC_SYMBOLS_PRIVATE_EXTERN": "YES",
        "CLANG_CXX_LANGUAGE_STANDARD": "c++20",
        "OTHER_CPLUSPLUSFLAGS": ["-fno-exceptions"]
      }
    }
  ]
}
