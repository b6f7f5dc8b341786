#pragma once
/// Opening a store's RocksDB directly, with every column family it holds and default
/// options, the way another build of Flotilla would: for tests that write what a future
/// release might (a newer layout, a new family).

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>
#include <rocksdb/db.h>

#include "tests/storage/support.hpp"

namespace flotilla::storage::test {

/// Calls fn(db) with the store in `dir` open, then closes it; fn(db, family) with the
/// handle of the column family `family`, when one is named.
template <class Fn>
void with_raw_store(const temp_dir& dir, Fn&& fn, const std::string& family = {}) {
  std::vector<std::string> names;
  REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions{}, dir.state().string(), &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const auto& name : names)
    families.emplace_back(name, rocksdb::ColumnFamilyOptions{});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  REQUIRE(rocksdb::DB::Open(rocksdb::DBOptions{}, dir.state().string(), families, &handles, &db).ok());
  if constexpr (std::is_invocable_v<Fn, rocksdb::DB&>) {
    fn(*db);
  } else {
    const auto at = std::find(names.begin(), names.end(), family);
    REQUIRE(at != names.end());
    fn(*db, handles[static_cast<std::size_t>(at - names.begin())]);
  }
  for (auto* h : handles)
    REQUIRE(db->DestroyColumnFamilyHandle(h).ok());
  delete db;
}

}  // namespace flotilla::storage::test
