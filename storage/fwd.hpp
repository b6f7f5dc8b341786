#pragma once
/// Forward declarations of the storage module.

#include <cstdint>

namespace flotilla::storage {

enum class errc : std::uint8_t;
enum class family : std::uint8_t;
struct error;
struct store_options;
struct table_commit;
struct table_state;
struct hold_entry;
class state_store;

}  // namespace flotilla::storage
