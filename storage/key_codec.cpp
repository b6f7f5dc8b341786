#include "storage/key_codec.hpp"

namespace flotilla::storage::keys {

namespace {

std::string two_part(char tag, std::string_view a, std::string_view b) {
  std::string out;
  out.reserve(a.size() + b.size() + 2);
  out.push_back(tag);
  out.append(a);
  out.push_back('\0');
  out.append(b);
  return out;
}

}  // namespace

std::string table_key(std::string_view source, std::string_view table) {
  std::string out;
  out.reserve(source.size() + table.size() + 1);
  out.append(source);
  out.push_back('.');
  out.append(table);
  return out;
}

bool valid_name(std::string_view name) {
  return !name.empty() && name.find('\0') == std::string_view::npos;
}

void append_be64(std::string& out, std::uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((value >> shift) & 0xffU));
}

std::string be64(std::uint64_t value) {
  std::string out;
  out.reserve(8);
  append_be64(out, value);
  return out;
}

std::optional<std::uint64_t> read_be64(std::string_view bytes) {
  if (bytes.size() != 8)
    return std::nullopt;
  std::uint64_t value = 0;
  for (char c : bytes)
    value = (value << 8) | static_cast<unsigned char>(c);
  return value;
}

std::string run_record(std::string_view run_id) {
  std::string out(1, run_record_tag);
  out.append(run_id);
  return out;
}

std::string run_index(std::int64_t started_at_us, std::string_view run_id) {
  std::string out(1, run_index_tag);
  // Times before 1970 clamp to 0 so the unsigned order stays the time order.
  append_be64(out, started_at_us < 0 ? 0 : static_cast<std::uint64_t>(started_at_us));
  out.append(run_id);
  return out;
}

std::optional<run_index_parts> parse_run_index(std::string_view key) {
  if (key.size() < 9 || key.front() != run_index_tag)
    return std::nullopt;
  auto at = read_be64(key.substr(1, 8));
  return run_index_parts{static_cast<std::int64_t>(*at), std::string(key.substr(9))};
}

std::string hold_record(std::string_view target, std::string_view table) {
  return two_part(hold_record_tag, target, table);
}

std::string hold_counter(std::string_view target, std::string_view table) {
  return two_part(hold_counter_tag, target, table);
}

std::string hold_queue_prefix(std::string_view target, std::string_view table) {
  auto out = two_part(hold_queue_tag, target, table);
  out.push_back('\0');
  return out;
}

std::string hold_queue(std::string_view target, std::string_view table, std::uint64_t sequence) {
  auto out = hold_queue_prefix(target, table);
  append_be64(out, sequence);
  return out;
}

std::optional<hold_parts> parse_hold_record(std::string_view key) {
  if (key.empty() || key.front() != hold_record_tag)
    return std::nullopt;
  key.remove_prefix(1);
  auto nul = key.find('\0');
  if (nul == std::string_view::npos)
    return std::nullopt;
  return hold_parts{std::string(key.substr(0, nul)), std::string(key.substr(nul + 1))};
}

std::string prefix_successor(std::string_view prefix) {
  std::string out(prefix);
  while (!out.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(out.back());
    if (last != 0xff) {
      ++last;
      return out;
    }
    out.pop_back();
  }
  return out;
}

std::string printable(std::string_view key) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (char c : key) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u <= 0x7e && u != '\\') {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 0xf]);
    }
  }
  return out;
}

}  // namespace flotilla::storage::keys
