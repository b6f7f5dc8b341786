#include "storage/error.hpp"

#include <fmt/format.h>

#include "storage/key_codec.hpp"
#include "storage/state_store.hpp"

namespace flotilla::storage {

std::string_view to_string(errc code) {
  switch (code) {
    case errc::locked: return "locked";
    case errc::busy: return "busy";
    case errc::io_error: return "io_error";
    case errc::corruption: return "corruption";
    case errc::not_found: return "not_found";
    case errc::version_mismatch: return "version_mismatch";
    case errc::invalid_key: return "invalid_key";
    case errc::invalid_record: return "invalid_record";
    case errc::read_only: return "read_only";
    case errc::internal: return "internal";
  }
  return "internal";
}

bool is_transient(errc code) {
  return code == errc::locked || code == errc::busy;
}

error error::locked(std::string_view path, std::string_view reason) {
  return {errc::locked,
          fmt::format("cannot open the state store at '{}': another flotilla process is using "
                      "it ({}). Wait for that run, retry or stream to finish, or stop it, then "
                      "try again",
                      path, reason)};
}

std::string_view error::remedy(errc code) {
  switch (code) {
    case errc::io_error:
      return "check that the directory is readable and writable by the user Flotilla runs "
             "as, and that the disk is not full";
    case errc::corruption:
      return "the state files are damaged: restore the directory from a backup, or move it "
             "aside to start from empty state (watermarks, baselines and holds are then lost)";
    case errc::not_found:
      return "no state exists there yet: run `flotilla run` first, or check the -c path";
    default:
      return "see RocksDB's LOG file in that directory for details";
  }
}

error error::cannot_open(errc code, std::string_view path, std::string_view reason) {
  return {code, fmt::format("cannot open the state store at '{}': {}; {}", path, reason,
                            remedy(code))};
}

error error::newer_layout(std::string_view path, std::string_view found,
                          std::string_view supported) {
  return {errc::version_mismatch,
          fmt::format("the state store at '{}' has layout version {}, but this flotilla reads "
                      "only version {}: use the flotilla release that wrote it, or a newer one",
                      path, found, supported)};
}

error error::invalid_key(std::string_view what, std::string_view key) {
  return {errc::invalid_key,
          fmt::format("invalid {} '{}': names must not be empty or hold a NUL byte", what,
                      keys::printable(key))};
}

error error::invalid_record(family f, std::string_view key) {
  return {errc::invalid_record,
          fmt::format("the {} record '{}' does not parse: the state store is damaged or was "
                      "written by an incompatible flotilla",
                      to_string(f), keys::printable(key))};
}

error error::operation_failed(errc code, std::string_view operation, family f,
                              std::string_view key, std::string_view reason) {
  return {code, fmt::format("state store: cannot {} {} '{}': {}{}", operation, to_string(f),
                            keys::printable(key), reason,
                            is_transient(code) ? " (transient: retry)" : "")};
}

}  // namespace flotilla::storage
