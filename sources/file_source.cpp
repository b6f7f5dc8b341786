// csv and json adapters: each file is one table named after its stem; column types are
// inferred by DuckDB's own readers (read_csv / read_json_auto) in a private in-memory
// DuckDB, and rows are read through the same scan as the duckdb adapter.
//
// `path` is a file or a directory; a directory's *.csv files (csv) or *.json, *.ndjson
// and *.jsonl files (json) are its tables, not recursing into subdirectories.

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <type_traits>
#include <utility>

#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sources/adapters.hpp"
#include "schema/toml_text.hpp"
#include "sources/duckdb_common.hpp"
#include "sources/errors.hpp"
#include "sources/marker.hpp"
#include "sources/sql_text.hpp"
#include "sources/type_mapping.hpp"
#include "sources/values.hpp"

namespace flotilla::sources {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view fix_file =
    "fix the file, or move it out of the source's path";

/// Where a CSV file mixes line endings (CRLF lines and LF-only ones), which DuckDB's
/// reader cannot parse ("state machine reached an invalid state"), naming no line:
/// the first line that ends unlike the first one, or with a CR alone. Quoted newlines are
/// not told apart.
std::optional<std::string> mixed_line_endings(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::size_t line = 1;
  int first = 0;  // 1: CRLF, 2: LF
  char prev = 0;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      const char c = buf[i];
      // A CR alone ends a line too (old Mac files), which DuckDB's reader does not take.
      // (In UTF-16 a CR is followed by its NUL byte: a CRLF there is no CR alone.)
      if (prev == '\r' && c != '\n' && c != '\0')
        return fmt::format("line {} ends with a CR alone (old Mac line endings), which the CSV "
                           "reader does not take; convert the line endings to LF (mac2unix, "
                           "or tr '\\r' '\\n'), or",
                           line);
      if (c == '\n') {
        const int kind = prev == '\r' ? 1 : 2;
        if (first == 0)
          first = kind;
        else if (kind != first)
          return fmt::format("the file mixes line endings: line 1 ends with {}, line {} with {}; "
                             "convert it to one kind (dos2unix or unix2dos), or",
                             first == 1 ? "CRLF" : "LF", line, kind == 1 ? "CRLF" : "LF");
        ++line;
      }
      prev = c;
    }
  }
  return std::nullopt;
}

/// Takes every SAX event and keeps the first error: a JSON check in constant memory.
struct json_checker : nlohmann::json_sax<nlohmann::json> {
  std::string error;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = e.what();
    if (auto at = error.find("] "); at != std::string::npos)  // "[json.exception...] "
      error.erase(0, at + 2);
    return false;
  }
};

/// Where a JSON file DuckDB called malformed breaks, as "parse error at line L, column C:
/// ...", lines counted from 1 at the file's start; nullopt when it reads as JSON. DuckDB's
/// own count is off by one record in a file of one value per line.
std::optional<std::string> json_error_at(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char first = 0;
  while (in.get(first) && std::isspace(static_cast<unsigned char>(first))) {
  }
  if (!in)
    return std::nullopt;
  in.seekg(0);
  json_checker check;
  if (first == '[') {  // one array of records, however it spreads over lines
    nlohmann::json::sax_parse(in, &check);
    return check.error.empty() ? std::nullopt : std::optional(check.error);
  }
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    if (!nlohmann::json::sax_parse(line, &check) && !check.error.empty()) {
      const std::string one = "at line 1,";
      if (auto at = check.error.find(one); at != std::string::npos)
        check.error.replace(at, one.size(), fmt::format("at line {},", n));
      return check.error;
    }
  }
  return std::nullopt;
}

/// A file that opens a JSON array and does not close it (cut short: `[{...},{...},`),
/// which DuckDB reads as the records before the cut: the place it breaks, or nullopt.
/// Whether a JSON file is one array of records (its first character past a BOM and
/// white space is '['), rather than one record per line.
bool json_array_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  const std::size_t from = head.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;  // a UTF-8 BOM
  const auto non_space = [](char c) { return !std::isspace(static_cast<unsigned char>(c)); };
  const auto first =
      std::find_if(head.begin() + static_cast<std::ptrdiff_t>(from), head.end(), non_space);
  return first != head.end() && *first == '[';
}

/// The reader's format option for a JSON file: an array file is read as one
/// (`format = 'array'`): past a UTF-8 BOM, DuckDB's guess took the whole array for one
/// value, a single `json` row. Other files are left to its guess (one record per line, or
/// records spread over lines).
std::string json_format(const std::string& path) {
  return json_array_file(path) ? ", format = 'array'" : "";
}

/// JSON text's nesting, byte by byte, outside strings (their escapes taken): how deep the
/// objects and arrays open at the current byte are, and whether it is inside a string.
struct json_nesting {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  void feed(char c) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
};

/// JSON nested deeper than DuckDB's reader recurses safely (a record of 15,000 objects in
/// one another overflowed the reading thread's stack, and the process with it): the line
/// where the nesting passes the limit, scanned outside strings; nullopt when it never does.
std::optional<std::string> json_too_deep(const std::string& path) {
  constexpr std::size_t most = 1000;
  std::ifstream in(path, std::ios::binary);
  char buffer[1 << 16];
  json_nesting nesting;
  std::uint64_t line = 1;
  while (in.read(buffer, sizeof buffer).gcount() > 0) {
    const auto n = static_cast<std::size_t>(in.gcount());
    for (std::size_t i = 0; i < n; ++i) {
      line += buffer[i] == '\n' ? 1 : 0;
      nesting.feed(buffer[i]);
      if (nesting.depth > most)
        return fmt::format("line {} nests objects and arrays more than {} deep, deeper than "
                           "the reader takes",
                           line, most);
    }
  }
  return std::nullopt;
}

std::optional<std::string> unclosed_array(const std::string& path) {
  if (!json_array_file(path))
    return std::nullopt;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = in.tellg();
  if (!in || size <= 0)
    return std::nullopt;
  const auto non_space = [](char c) { return !std::isspace(static_cast<unsigned char>(c)); };
  std::string tail(static_cast<std::size_t>(std::min<std::streamoff>(size, 4096)), '\0');
  in.seekg(size - static_cast<std::streamoff>(tail.size()));
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  const auto last = std::find_if(tail.rbegin(), tail.rend(), non_space);
  if (last != tail.rend() && *last == ']')
    return std::nullopt;
  return "malformed JSON, " +
         json_error_at(path).value_or("the array that opens the file is never closed") +
         " (the file looks cut short)";
}

/// A decimal number's value as its significant digits and the power of ten of the first:
/// "-0012.3400e-5" and "1.234e-4" are both {"1234", -3}. Zero has no digits.
struct decimal_value {
  bool negative = false;
  std::string digits;
  long exponent = 0;
  friend bool operator==(const decimal_value&, const decimal_value&) = default;
};

decimal_value decimal_of(std::string_view text) {
  decimal_value v;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    v.negative = text[0] == '-';
    text.remove_prefix(1);
  }
  long exp = 0;
  if (const auto e = text.find_first_of("eE"); e != std::string_view::npos) {
    exp = std::strtol(std::string(text.substr(e + 1)).c_str(), nullptr, 10);
    text = text.substr(0, e);
  }
  const auto point = text.find('.');
  const std::string_view whole = text.substr(0, point);
  const std::string_view frac = point == std::string_view::npos ? "" : text.substr(point + 1);
  std::string digits = std::string(whole) + std::string(frac);
  long at = static_cast<long>(whole.size());
  const auto first = digits.find_first_not_of('0');
  if (first == std::string::npos)
    return decimal_value{};  // zero, of either sign
  at -= static_cast<long>(first);
  digits.erase(0, first);
  digits.erase(digits.find_last_not_of('0') + 1);
  v.digits = std::move(digits);
  v.exponent = at + exp;
  return v;
}

/// Finds the first number in a JSON file that DuckDB's reader would not load as written:
/// it reads a number with a point or an exponent as a double (its JSON columns too), so
/// one with more digits than a double keeps (12345678901234567.123456789) would load
/// rounded; and an integer read into a double column (inferred from the file's numbers)
/// past 2^53 likewise. `float_column` tells whether a top-level key's column reads as a
/// double. Per line for a file of one record per line; a file that is one array is read
/// as one document, its records counted.
struct json_digit_checker : nlohmann::json_sax<nlohmann::json> {
  std::function<bool(const std::string&)> float_column;
  std::size_t depth = 0, record_depth = 0, records = 0;
  std::string column;  // the current record's key (its column)
  std::string found;
  std::string found_column;  ///< the record's key holding it
  bool found_nested = false;  ///< inside an object or array, not the column's own value
  /// A file that is one array: a null element is a record that is no object (DuckDB would
  /// load a row of NULLs); `found` says so, and `null_record` is set.
  bool array_file = false;
  bool null_record = false;
  bool null() override {
    if (!array_file || depth != 1)
      return true;
    null_record = true;
    found = fmt::format("record {} of the file's array is null, not a JSON object",
                        records + 1);
    return false;
  }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t v) override {
    // The magnitude as an integer: 2^53 + 1 as a double is 2^53, which would pass.
    const auto magnitude = v < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(v)
                                 : static_cast<std::uint64_t>(v);
    return whole(magnitude, std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return whole(static_cast<std::uint64_t>(v), std::to_string(v));
  }
  bool number_float(number_float_t v, const string_t& raw) override {
    // Past a double's range (1e400) it would load as an infinity; below it, as 0.
    const bool overflow = !std::isfinite(v);
    if (overflow || (v == 0 && raw.find_first_of("123456789") < raw.find_first_of("eE"))) {
      found_column = column;
      found_nested = depth > record_depth;
      found = fmt::format("column '{}' holds{} the number {}, {} a double holds: it would load "
                          "as {}",
                          column, found_nested ? ", nested in its value," : "", raw,
                          overflow ? "past the largest" : "below the smallest",
                          overflow ? (v > 0 ? "inf" : "-inf") : "0");
      return false;
    }
    const bool integer_literal = raw.find_first_of(".eE") == string_t::npos;
    if (integer_literal && !float_column(column))
      return true;  // an integer past 64 bits reads exactly as text or a decimal
    const std::string as_double = shortest_double(v);
    if (decimal_of(raw) == decimal_of(as_double))
      return true;
    found_column = column;
    found_nested = depth > record_depth;
    found = fmt::format("column '{}' holds{} the number {}, which has more digits than the JSON "
                        "reader keeps: it reads such numbers as doubles, and it would load as "
                        "{}",
                        column, found_nested ? ", nested in its value," : "", raw, as_double);
    return false;
  }
  bool whole(std::uint64_t magnitude, const std::string& text) {
    if (magnitude <= (std::uint64_t{1} << 53) || !float_column(column) || depth > record_depth)
      return true;
    found_column = column;
    found = fmt::format("column '{}' holds the integer {}, past the 2^53 a double (the type "
                        "inferred from the file's numbers) holds exactly",
                        column, text);
    return false;
  }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth;
    if (record_depth == 0)
      record_depth = depth;
    if (depth == record_depth)
      ++records;
    return true;
  }
  bool key(string_t& k) override {
    if (depth == record_depth)
      column = k;
    return true;
  }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth;
    return true;
  }
  bool end_array() override {
    --depth;
    return true;
  }
  bool parse_error(std::size_t, const std::string& token,
                   const nlohmann::detail::exception& e) override {
    // A number past a double's range is a parse error to nlohmann (out_of_range.406);
    // DuckDB's reader would load it as an infinity. Other malformed JSON is told by the
    // read itself.
    if (e.id == 406) {
      found_column = column;
      found_nested = depth > record_depth;
      found = fmt::format("column '{}' holds{} the number {}, past the largest a double holds: "
                          "it would load as {}",
                          column, found_nested ? ", nested in its value," : "", token,
                          token.starts_with('-') ? "-inf" : "inf");
    }
    return false;
  }
};

/// The first JSON number that would load changed ("line N: column ... "), or nullopt.
/// Also finds a record that is `null` (`null_record` set): DuckDB loads it as a row of
/// NULLs, where it is no record at all.
std::optional<std::string> json_lost_digits(const std::string& path,
                                            std::function<bool(const std::string&)> float_column,
                                            std::string& column, bool& nested, bool& null_record) {
  std::ifstream in(path, std::ios::binary);
  json_digit_checker check;
  check.float_column = std::move(float_column);
  if (json_array_file(path)) {
    check.array_file = true;
    nlohmann::json::sax_parse(in, &check, nlohmann::json::input_format_t::json, false);
    if (check.found.empty())
      return std::nullopt;
    null_record = check.null_record;
    if (null_record)
      return check.found;
    column = check.found_column;
    nested = check.found_nested;
    return fmt::format("record {}: {}", check.records, check.found);
  }
  std::size_t n = 0;
  // Nesting at the start of each line, strings skipped: a line that begins outside any
  // value and holds `null` is a record of its own (a `null` inside a value spread over
  // lines is not).
  json_nesting nesting;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (nesting.depth == 0 && !nesting.in_string) {
      const auto b = line.find_first_not_of(" \t\r");
      const auto e = line.find_last_not_of(" \t\r");
      if (b != std::string::npos && line.compare(b, e - b + 1, "null") == 0) {
        null_record = true;
        return fmt::format("line {} holds null, not a JSON object", n);
      }
    }
    // Only a line with a long run of digits can hold such a number: the rest are skipped
    // unparsed (16 digits: a double keeps any 15).
    std::size_t run = 0, longest = 0;
    for (const char c : line) {
      run = (c >= '0' && c <= '9') ? run + 1 : (c == '.' ? run : 0);
      longest = std::max(longest, run);
      nesting.feed(c);
    }
    // ... or an exponent of 3 digits, past a double's range or below it.
    static const std::regex wide_exponent(R"([0-9.][eE][+-]?[0-9]{3})");
    if (longest < 16 && !std::regex_search(line, wide_exponent))
      continue;
    check.depth = check.record_depth = 0;
    nlohmann::json::sax_parse(line, &check, nlohmann::json::input_format_t::json, false);
    if (!check.found.empty()) {
      column = check.found_column;
      nested = check.found_nested;
      return fmt::format("line {}: {}", n, check.found);
    }
  }
  return std::nullopt;
}

/// The top-level key (column) of the first number written `literal` in a JSON file, or
/// empty: names the column of a value DuckDB's reader could not convert.
std::string json_column_of_number(const std::string& path, const std::string& literal) {
  struct finder : json_digit_checker {
    std::string literal, hit;
    bool number_integer(number_integer_t v) override { return seen(std::to_string(v)); }
    bool number_unsigned(number_unsigned_t v) override { return seen(std::to_string(v)); }
    bool number_float(number_float_t, const string_t& raw) override { return seen(raw); }
    bool seen(const std::string& text) {
      if (text != literal)
        return true;
      hit = column;
      return false;
    }
  } f;
  f.literal = literal;
  f.float_column = [](const std::string&) { return false; };
  std::ifstream in(path, std::ios::binary);
  if (json_array_file(path)) {
    nlohmann::json::sax_parse(in, &f, nlohmann::json::input_format_t::json, false);
    return f.hit;
  }
  for (std::string line; f.hit.empty() && std::getline(in, line);) {
    if (line.find(literal) == std::string::npos)
      continue;
    f.depth = f.record_depth = 0;
    nlohmann::json::sax_parse(line, &f, nlohmann::json::input_format_t::json, false);
  }
  return f.hit;
}

/// The top-level keys (columns) of a JSON file that hold an integer past a bigint's range
/// within an unsigned 64-bit one (up to 18446744073709551615): DuckDB's reader infers such
/// a column BIGINT and then fails to read it. Per line for a file of one record per line,
/// only lines with 19 digits in a row parsed.
std::set<std::string> json_unsigned_columns(const std::string& path) {
  struct finder : json_digit_checker {
    std::set<std::string> hits;
    bool null() override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool number_unsigned(number_unsigned_t v) override {
      if (v > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max()) &&
          depth == record_depth)
        hits.insert(column);
      return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
      return false;
    }
  } f;
  f.float_column = [](const std::string&) { return false; };
  std::ifstream in(path, std::ios::binary);
  if (json_array_file(path)) {
    nlohmann::json::sax_parse(in, &f, nlohmann::json::input_format_t::json, false);
    return std::move(f.hits);
  }
  for (std::string line; std::getline(in, line);) {
    std::size_t run = 0, longest = 0;
    for (const char c : line) {
      run = (c >= '0' && c <= '9') ? run + 1 : 0;
      longest = std::max(longest, run);
    }
    if (longest < 19)
      continue;
    f.depth = f.record_depth = 0;
    nlohmann::json::sax_parse(line, &f, nlohmann::json::input_format_t::json, false);
  }
  return std::move(f.hits);
}

/// What a JSON value is, for a message: "an array", "a number", ...
struct json_kind_sax : json_checker {
  std::size_t depth = 0;
  std::size_t index = 0;  ///< values seen at the depth watched
  std::size_t watch = 0;  ///< the depth whose values are records: 0 a line's, 1 an array's
  std::string kind;       ///< of the first of them that is not an object
  bool at_record() {
    if (depth != watch)
      return false;
    ++index;
    return true;
  }
  bool other(const char* what) {
    if (at_record() && kind.empty()) {
      kind = what;
      return false;
    }
    return true;
  }
  bool boolean(bool) override { return other("true or false"); }
  bool number_integer(number_integer_t) override { return other("a number"); }
  bool number_unsigned(number_unsigned_t) override { return other("a number"); }
  bool number_float(number_float_t, const string_t&) override { return other("a number"); }
  bool string(string_t&) override { return other("a string"); }
  bool null() override {
    at_record();  // a null record reads as a row of NULLs, as DuckDB reads it
    return true;
  }
  bool start_object(std::size_t) override {
    at_record();
    ++depth;
    return true;
  }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override {
    if (!other("an array"))
      return false;
    ++depth;
    return true;
  }
  bool end_array() override {
    --depth;
    return true;
  }
};

/// Where a JSON file holds a record that is not an object ("line 3 holds an array, not
/// an object"), as DuckDB's reader refuses it; nullopt when none is found.
std::optional<std::string> json_non_record_at(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  json_kind_sax check;
  if (json_array_file(path)) {
    check.watch = 1;
    nlohmann::json::sax_parse(in, &check, nlohmann::json::input_format_t::json, false);
    if (check.kind.empty())
      return std::nullopt;
    return fmt::format("record {} of the file's array is {}, not a JSON object", check.index,
                       check.kind);
  }
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const auto first = line.find_first_not_of(" \t\r\xEF\xBB\xBF");
    if (first == std::string::npos || line[first] == '{' || !nlohmann::json::accept(line))
      continue;  // a line of a record spread over several lines is no value of its own
    check = json_kind_sax{};
    nlohmann::json::sax_parse(line, &check, nlohmann::json::input_format_t::json, false);
    if (!check.kind.empty()) {
      std::string shown = line.substr(first, 60);
      while (!shown.empty() && std::isspace(static_cast<unsigned char>(shown.back())))
        shown.pop_back();
      return fmt::format("line {} holds {} ({}{}), not a JSON object", n, check.kind, shown,
                         line.size() > first + 60 ? "..." : "");
    }
  }
  return std::nullopt;
}

/// Whether every record of a JSON file is an empty object (`{}`): no key, so no column.
bool json_records_all_empty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (json_array_file(path)) {
    const auto all = nlohmann::json::parse(in, nullptr, false);
    if (!all.is_array() || all.empty())
      return false;
    return std::all_of(all.begin(), all.end(),
                       [](const auto& r) { return r.is_object() && r.empty(); });
  }
  bool any = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r\xEF\xBB\xBF") == std::string::npos)
      continue;
    const auto r = nlohmann::json::parse(line, nullptr, false);
    if (!r.is_object() || !r.empty())
      return false;
    any = true;
  }
  return any;
}

/// DuckDB's reason, with the place a malformed JSON file breaks as counted from its start.
std::string json_reason(const std::string& path, std::string reason) {
  if ((reason.find("expected records") != std::string::npos ||
       reason.find("Expected OBJECT") != std::string::npos) &&
      !json_non_record_at(path) && json_records_all_empty(path))
    return "no record of the file has a key (every one is {}): a JSON source's columns are "
           "its records' keys, so there is no column to load: give the records their keys";
  if (reason.find("expected records") != std::string::npos ||
      reason.find("Expected OBJECT") != std::string::npos)
    return json_non_record_at(path).value_or("a value in the file is not a JSON object") +
           ": every line of a JSON-lines file, or every element of a file that is one JSON "
           "array, must be one record (an object of column names and values)";
  // DuckDB's advice here names its reader's options, which flotilla.toml has not (and
  // ignore_errors would drop the record): Flotilla's own words, with the line.
  static const std::regex duplicate(R"re(Object (\{.*\}) has duplicate key "((?:[^"\\]|\\.)*)")re");
  if (std::smatch m; std::regex_search(reason, m, duplicate)) {
    std::size_t n = 0, found = 0;
    std::ifstream in(path, std::ios::binary);
    for (std::string l; found == 0 && std::getline(in, l);)
      if (++n, l.find(m[1].str()) != std::string::npos)
        found = n;
    return fmt::format("{} repeats key \"{}\" in one record ({}): a record holds each key once; "
                       "remove the duplicate",
                       found ? fmt::format("line {}", found) : std::string("a record"), m[2].str(),
                       m[1].str().size() > 120 ? m[1].str().substr(0, 120) + "..." : m[1].str());
  }
  if (reason.find("Malformed JSON") == std::string::npos)
    return reason;
  if (auto at = json_error_at(path))
    return "malformed JSON, " + *at;  // DuckDB's own place would contradict it
  return reason;
}

/// A value DuckDB could not convert to the type the column is read as (declared, or inferred),
/// in Flotilla's terms: the line, the column, the value and the pin that fixes it.
/// nullopt for any other error.
std::size_t csv_physical_line(const std::string& path, std::size_t record);

/// `csv_path`, when given: the CSV file, whose line an editor shows is named (DuckDB's
/// number is the record's).
std::optional<std::pair<std::string, std::string>> conversion_error(std::string_view reason,
                                                                    std::string_view source,
                                                                    std::string_view table,
                                                                    const std::string& csv_path = {}) {
  static const std::regex line(R"(CSV Error on Line: (\d+))");
  static const std::regex column(R"re(Error when converting column "((?:[^"]|"")*)")re");
  static const std::regex value(R"re(Could not convert string "(.*?)" to '([A-Za-z0-9_ ()]+)')re");
  const std::string text(reason);
  std::smatch l, c, v;
  if (!std::regex_search(text, l, line) || !std::regex_search(text, c, column) ||
      !std::regex_search(text, v, value))
    return std::nullopt;
  std::string type = v[2].str();
  for (auto& ch : type)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return std::pair{
      fmt::format("line {}: column '{}' holds '{}', which is not a {} (the column's type, as "
                  "declared in flotilla.toml or else inferred from the file)",
                  csv_path.empty() ? std::stoul(l[1].str())
                                   : csv_physical_line(csv_path, std::stoul(l[1].str())),
                  c[1].str(), v[1].str(), type),
      fmt::format("pin the column's type in flotilla.toml ({} columns = "
                  "{{ {} = \"text\" }}), or fix the value",
                  schema::table_header(source, table), schema::toml_key(c[1].str()))};
}

// Fields in the first record of a CSV file, splitting on `delim` outside double quotes.
std::size_t header_fields(const std::string& path, char delim = ',') {
  std::ifstream in(path, std::ios::binary);
  std::size_t fields = 1;
  bool quoted = false;
  char c = 0;
  while (in.get(c)) {
    if (c == '"')
      quoted = !quoted;
    else if (!quoted && c == delim)
      ++fields;
    else if (!quoted && (c == '\n' || c == '\r'))
      break;
  }
  return fields;
}

/// The first record (from line 2, the header's line 1) whose field count differs from
/// the header's `fields`, split on `delim` outside double quotes: its line and its field
/// count. nullopt when every record has the header's fields. One pass.
std::optional<std::pair<std::size_t, std::size_t>> line_with_other_fields(
    const std::string& path, char delim, std::size_t fields) {
  std::ifstream in(path, std::ios::binary);
  std::size_t line = 1, record_line = 1, n = 1;
  bool quoted = false, header = true, empty = true;
  char c = 0;
  // Whether the record that just ended has other fields than the header (an empty line
  // is no record); then the next one starts.
  const auto other_fields = [&] {
    const bool mismatch = !header && !empty && n != fields;
    header = false;
    empty = true;
    return mismatch;
  };
  while (in.get(c)) {
    if (c == '"') {
      quoted = !quoted;
      empty = false;
    } else if (quoted) {
      if (c == '\n')
        ++line;
    } else if (c == delim) {
      ++n;
      empty = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && in.peek() == '\n')
        in.get(c);
      if (other_fields())
        return std::pair{record_line, n};
      n = 1;
      record_line = ++line;
    } else {
      empty = false;
    }
  }
  if (other_fields())
    return std::pair{record_line, n};
  return std::nullopt;
}

/// The first 64 KiB of a file (all of a smaller one).
constexpr std::size_t head_bytes = 1 << 16;
std::string file_head(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(head_bytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head;
}

/// Whether `needle` occurs anywhere in the file's bytes. One pass.
bool file_contains(const std::string& path, const std::string& needle) {
  std::ifstream in(path, std::ios::binary);
  std::string window;
  std::array<char, 1 << 16> buf{};
  while (in) {
    in.read(buf.data(), buf.size());
    // The end of the last chunk before this one, so a needle across chunks is found.
    window.erase(0, window.size() > needle.size() ? window.size() - needle.size() : 0);
    window.append(buf.data(), static_cast<std::size_t>(in.gcount()));
    if (window.find(needle) != std::string::npos)
      return true;
  }
  return false;
}

/// The line (1-based) of the file's first empty JSON key (`""` then `:`), 0 when none is
/// found. One pass, line by line.
std::size_t line_of_empty_key(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    for (auto at = line.find("\"\""); at != std::string::npos; at = line.find("\"\"", at + 2)) {
      const auto next = line.find_first_not_of(" \t\r", at + 2);
      // Not the end of an escaped quote inside a string ("a\""): a key starts after
      // '{', ',' or blanks.
      const auto before = at == 0 ? std::string::npos : line.find_last_not_of(" \t", at - 1);
      if (next != std::string::npos && line[next] == ':' &&
          (before == std::string::npos || line[before] == '{' || line[before] == ','))
        return n;
    }
  }
  return 0;
}

/// Whether the file is compressed (DuckDB's readers unpack .gz and .zst): its bytes say
/// nothing about its lines.
bool compressed(const std::string& path) {
  return path.ends_with(".gz") || path.ends_with(".zst");
}

/// A CSV file whose last line has no line end, after a first line that has one: a
/// writer may be appending that row still (cut at "3,carol,30" of "3,carol,3000.75"),
/// and an incremental table would load the cut row once and never again. Why, or
/// nullopt (a whole last line, a header alone, an empty or compressed file).
std::optional<std::string> unterminated_last_line(const std::string& path) {
  if (compressed(path))
    return std::nullopt;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto size = static_cast<std::streamoff>(in.tellg());
  if (!in || size <= 0)
    return std::nullopt;
  in.seekg(size - 1);
  char last = 0;
  in.get(last);
  if (last == '\n' || last == '\r')
    return std::nullopt;
  // A header with no line end and no row: nothing is cut.
  in.seekg(0);
  char buffer[65536];
  bool ended = false;
  while (!ended && in.read(buffer, sizeof buffer).gcount() > 0)
    ended = std::memchr(buffer, '\n', static_cast<std::size_t>(in.gcount())) != nullptr ||
            std::memchr(buffer, '\r', static_cast<std::size_t>(in.gcount())) != nullptr;
  if (!ended)
    return std::nullopt;
  return std::string("its last line has no line end, so a writer may still be appending that "
                     "row; an incremental table (cursor_column) loads each row once, and a cut "
                     "row would stay as it was cut");
}

/// Whether the file holds nothing but white space (after a UTF-8 BOM), or for JSON an
/// empty array: no header, no keys.
bool empty_file(const std::string& path, bool json) {
  const std::string head = file_head(path);
  if (head.size() == head_bytes || (compressed(path) && !head.empty()))
    return false;
  std::string_view v = head;
  if (v.starts_with("\xEF\xBB\xBF"))
    v.remove_prefix(3);
  std::string compact;
  for (char c : v)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
      compact += c;
  return compact.empty() || (json && compact == "[]");
}

/// Whether a CSV file is its header line alone (white space after it).
bool header_only(const std::string& path) {
  const std::string head = file_head(path);
  if (head.size() == head_bytes || compressed(path))
    return false;
  const auto end = head.find_first_of("\r\n");
  if (end == std::string::npos)
    return true;
  return head.find_first_not_of(" \t\r\n", end) == std::string::npos;
}

/// Whether the file's first line (after a UTF-8 BOM, and an opening double quote) begins
/// with `name`: false when DuckDB took a later line as the header.
bool first_line_starts_with(const std::string& path, std::string_view name) {
  if (compressed(path))
    return true;  // its lines are not its bytes: not checked
  std::ifstream in(path, std::ios::binary);
  std::string line;
  // Blank lines before the header hold nothing to leave out: the first other line counts.
  while (std::getline(in, line) && line.find_first_not_of(" \t\r") == std::string::npos &&
         line.find("\xEF\xBB\xBF") == std::string::npos) {
  }
  std::string_view l = line;
  if (l.starts_with("\xEF\xBB\xBF"))
    l.remove_prefix(3);
  if (l.starts_with('"'))
    l.remove_prefix(1);
  while (!l.empty() && (l.front() == ' ' || l.front() == '\t'))
    l.remove_prefix(1);
  return l.starts_with(name);
}

/// The delimiter the file's first line most likely uses (, ; tab |, outside double
/// quotes), and how many fields it splits that line into.
std::pair<char, std::size_t> header_delimiter(const std::string& path) {
  char best = ',';
  std::size_t most = 0;
  for (char d : {',', ';', '\t', '|'}) {
    const std::size_t n = header_fields(path, d);
    if (n > most) {
      most = n;
      best = d;
    }
  }
  return {best, most};
}

/// Whether the file holds a blank line (two line ends in a row, LF, CRLF or CR alike),
/// one pass over its bytes. A quoted value spanning lines may look like one: the caller
/// only acts on rows that such a line would read as.
bool has_blank_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 1 << 16> buf{};
  char prev = 0;
  while (in) {
    in.read(buf.data(), buf.size());
    const auto n = static_cast<std::size_t>(in.gcount());
    for (std::size_t i = 0; i < n; ++i) {
      const char c = buf[i];
      if ((prev == '\n' && (c == '\n' || c == '\r')) || (prev == '\r' && c == '\r'))
        return true;
      prev = c;
    }
  }
  return false;
}

/// Whether a value in the CSV file begins with a double quote: at the file's or a line's
/// start, or right after a delimiter DuckDB may sniff (, ; tab |). One pass over the bytes.
bool quote_opens_a_value(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 1 << 16> buf{};
  const auto opens = [](char before) {
    return before == '\n' || before == '\r' || before == ',' || before == ';' ||
           before == '\t' || before == '|';
  };
  char last = '\n';  // the previous block's last byte
  while (in) {
    in.read(buf.data(), buf.size());
    const auto n = static_cast<std::size_t>(in.gcount());
    // Only the quotes are looked at (memchr), so a file without any costs one fast pass.
    for (const char* q = static_cast<const char*>(std::memchr(buf.data(), '"', n)); q;
         q = static_cast<const char*>(std::memchr(q + 1, '"', n - (q + 1 - buf.data())))) {
      if (opens(q == buf.data() ? last : q[-1]))
        return true;
    }
    if (n > 0)
      last = buf[n - 1];
  }
  return false;
}

/// A field name a CSV header line holds twice (exactly), or empty: the line split on the
/// most frequent of the usual delimiters, each field without its quotes and blanks.
/// A header line's fields, split at its most frequent delimiter, spaces and quotes trimmed.
std::vector<std::string> header_line_fields(const std::string& header) {
  char delimiter = ',';
  std::size_t most = 0;
  for (char d : {',', ';', '\t', '|'})
    if (auto n = static_cast<std::size_t>(std::count(header.begin(), header.end(), d)); n > most) {
      most = n;
      delimiter = d;
    }
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= header.size()) {
    auto end = header.find(delimiter, start);
    if (end == std::string::npos)
      end = header.size();
    std::string field = header.substr(start, end - start);
    const auto first = field.find_first_not_of(" \t\"\r");
    const auto last = field.find_last_not_of(" \t\"\r");
    out.push_back(first == std::string::npos ? std::string() : field.substr(first, last - first + 1));
    start = end + 1;
  }
  return out;
}

std::string repeated_header_field(const std::string& header) {
  std::set<std::string> seen;
  for (const auto& field : header_line_fields(header))
    if (!field.empty() && !seen.insert(field).second)
      return field;
  return {};
}

/// DuckDB's readers rename a column whose name another column of the file has in another
/// case ("a", "A" load as "a", "A_1"), so such a file cannot load under its own names.
/// The message naming the two, or nullopt. Cheap unless a name looks renamed: only then is
/// the file's own header (CSV) or first 64 KiB (JSON) read to tell a real "A_1" apart.
std::optional<std::string> renamed_column(
    const std::string& path, bool json,
    const std::vector<std::pair<std::string, std::string>>& described) {
  if (compressed(path))
    return std::nullopt;  // its header is not its first bytes: not checked
  static const std::regex numbered(R"((.+)_[0-9]+)");
  static const std::regex unnamed(R"(column[0-9]+)");
  static const std::regex unnamed_key(R"(C[0-9]+)");
  std::string head;
  const auto file_has = [&](const std::string& name) {
    if (head.empty()) {
      head = file_head(path);
      if (!json)
        head = head.substr(0, head.find_first_of("\r\n"));
    }
    return head.find(json ? "\"" + name + "\"" : name) != std::string::npos;
  };
  // A file with a header has some column DuckDB did not name column<N> itself.
  const bool has_header = std::any_of(described.begin(), described.end(), [](const auto& d) {
    return !std::regex_match(d.first, unnamed);
  });
  // A header line whose every field is empty (",,", "\"\",\"\""): DuckDB takes it for the
  // header and names every column column<N>, which would be the target table's columns.
  if (!json && !has_header && !described.empty()) {
    std::string first = file_head(path);
    if (first.starts_with("\xEF\xBB\xBF"))
      first.erase(0, 3);
    first = first.substr(0, first.find_first_of("\r\n"));
    if (first.find_first_of(",;|\t\"") != std::string::npos &&
        first.find_first_not_of(",;|\t\" ") == std::string::npos)
      return fmt::format("the file's header (line 1) has no column names, only empty fields "
                         "(DuckDB would call the columns '{}', ...); name the columns in the "
                         "file's first line",
                         described.front().first);
  }
  for (std::size_t i = 0; i < described.size(); ++i) {
    const std::string& name = described[i].first;
    // A JSON key that is empty: DuckDB names the column C<N>, and a read naming the
    // columns would then find no such key and load NULLs.
    if (json && std::regex_match(name, unnamed_key) && !file_has(name) &&
        !file_contains(path, "\"" + name + "\""))
    {
      const std::size_t line = line_of_empty_key(path);
      return fmt::format("{}a record has an empty key (\"\": ...), which DuckDB would load as a "
                         "column '{}' holding no values; name the key in the file",
                         line == 0 ? std::string() : fmt::format("line {}: ", line), name);
    }
    // A CSV header field left empty: DuckDB names the column column<N>. Among named
    // columns, that name is DuckDB's, not the file's.
    if (!json && has_header && std::regex_match(name, unnamed) && !file_has(name))
      return fmt::format("the file's header has no name for its column {} (DuckDB would call "
                         "it '{}'); name it in the file",
                         i + 1, name);
    std::smatch m;
    if (!std::regex_match(name, m, numbered))
      continue;
    const std::string base = m[1].str();
    const auto other = std::find_if(described.begin(), described.end(), [&](const auto& d) {
      return d.first != name &&
             schema::same_name(d.first, base, schema::name_rule::case_insensitive);
    });
    if (other == described.end() || file_has(name))
      continue;  // no such pair, or the file has the name itself
    if (other->first == base) {
      // DuckDB renames again where its first new name is taken too ("a,a,a_1": the
      // second "a" ends up "a_1_1"): the name the header has twice is the one to report.
      std::string twice = base;
      if (!json) {
        if (auto repeated = repeated_header_field(head); !repeated.empty()) {
          twice = repeated;
        } else {
          // No name twice in the header: DuckDB's name for an empty field ("column1") met
          // the file's own ("id,,column1"). The empty field is the problem.
          const auto fields = header_line_fields(head.substr(0, head.find('\n')));
          for (std::size_t k = 0; k < fields.size(); ++k)
            if (fields[k].empty())
              return fmt::format("the file's header has no name for its column {}; name it in "
                                 "the file",
                                 k + 1);
        }
      }
      return fmt::format("the file has two columns named '{}' (DuckDB's reader would load the "
                         "second as '{}'); rename one of them in the file",
                         twice, name);
    }
    return fmt::format("the file's columns '{}' and '{}' differ only in case, which DuckDB's "
                       "reader cannot tell apart (it would load the second as '{}'); rename "
                       "one of them in the file",
                       other->first, base, name);
  }
  return std::nullopt;
}

/// The line of the file (as an editor numbers them) where record `record` of a CSV file
/// begins: DuckDB numbers its errors by record ("CSV Error on Line: 3"), and a quoted value
/// holding line breaks makes a record span several lines. Counted from the file's start,
/// a line break inside double quotes being the value's. `record` itself when the file
/// cannot be read.
std::size_t csv_physical_line(const std::string& path, std::size_t record) {
  std::ifstream in(path, std::ios::binary);
  if (!in || record <= 1)
    return record;
  std::size_t records = 1, lines = 1;
  bool quoted = false;
  char buf[64 * 1024];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    const auto n = static_cast<std::size_t>(in.gcount());
    for (std::size_t i = 0; i < n; ++i) {
      if (buf[i] == '"') {
        quoted = !quoted;
      } else if (buf[i] == '\n') {
        ++lines;
        if (!quoted && ++records == record)
          return lines;
      }
    }
  }
  return record;
}

/// On line `number` of a CSV file, a quoted value whose closing quote is followed by more
/// text before the next delimiter ("a"b): the value as written, up to that delimiter.
/// DuckDB calls it an unterminated quote as well. nullopt: the line has no such value (its
/// quote is not closed on the line at all).
std::optional<std::string> text_after_closing_quote(const std::string& path, std::size_t number) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  for (std::size_t n = 0; n < number; ++n)
    if (!std::getline(in, line))
      return std::nullopt;
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  const char delim = header_delimiter(path).first;
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t start = i;
    if (line[i] == '"') {
      ++i;
      while (i < line.size()) {
        if (line[i] == '"' && i + 1 < line.size() && line[i + 1] == '"')
          i += 2;
        else if (line[i] == '"')
          break;
        else
          ++i;
      }
      if (i >= line.size())
        return std::nullopt;  // not closed on this line
      if (++i < line.size() && line[i] != delim)
        return line.substr(start, std::min(line.find(delim, i), line.size()) - start);
    }
    i = line.find(delim, i);
    if (i == std::string::npos)
      break;
    ++i;
  }
  return std::nullopt;
}

/// DuckDB's complaint about a CSV read, in Flotilla's terms where it has them: the line
/// and what is wrong with it, without DuckDB's list of reader options to change.
std::string csv_reason(std::string reason, const std::string& path) {
  static const std::regex line(R"(CSV Error on Line: (\d+))");
  std::smatch l;
  if (reason.find("unterminated quote") != std::string::npos && std::regex_search(reason, l, line)) {
    const std::size_t at = csv_physical_line(path, std::stoul(l[1].str()));
    if (auto value = text_after_closing_quote(path, at))
      return fmt::format("line {}: the value {} closes its double quote before its end, and a "
                         "quoted value must end at its closing quote; inside a quoted value a "
                         "double quote is written twice (\"\"), so quote the whole value and "
                         "double the quotes in it",
                         at, *value);
    return fmt::format("line {}: a value opens a double quote that is never closed, so every "
                       "line after it would be read into that value",
                       at);
  }
  if (reason.find("This file is not utf-8 encoded") != std::string::npos &&
      std::regex_search(reason, l, line))
    return fmt::format("line {} (or near it) is not UTF-8 text: the file is in another encoding "
                       "(latin-1, windows-1252?), which Flotilla does not read; convert it to "
                       "UTF-8 (iconv -f latin1 -t utf-8)",
                       l[1].str());
  if (auto at = reason.find("\n\nPossible fixes"); at != std::string::npos)
    reason.erase(at);
  return reason;
}

/// A database or binary file under a csv or json source (by its first bytes): what it
/// is, and the adapter that reads it. nullopt: no such file.
std::optional<std::string> not_text(const std::string& head) {
  if (head.starts_with(std::string_view("SQLite format 3\0", 16)))
    return std::string("the file is a SQLite database, not text: read it with a source of "
                       "adapter = \"sqlite\" (path = the file), or move it out of this "
                       "source's path");
  if (head.size() >= 12 && head.compare(8, 4, "DUCK") == 0)
    return std::string("the file is a DuckDB database, not text: read it with a source of "
                       "adapter = \"duckdb\" (path = the file), or move it out of this "
                       "source's path");
  if (head.starts_with("PAR1"))
    return std::string("the file is a Parquet file, not text, which Flotilla does not read; "
                       "export it as CSV or JSON, or move it out of this source's path");
  if (head.starts_with("PK\x03\x04"))
    return std::string("the file is a ZIP archive (or an .xlsx workbook), not text; extract "
                       "or export it as CSV, or move it out of this source's path");
  return std::nullopt;
}

/// What is wrong with a whole file, when DuckDB's complaint about it misleads: a UTF-16
/// file (DuckDB sees invalid UTF-8, and latin-1 advice would garble it), or a line longer
/// than DuckDB's reader takes (its error names another line, and a reader option no
/// flotilla.toml key sets). nullopt: DuckDB's reason stands.
std::optional<std::string> file_level_reason(const std::string& path, const std::string& reason) {
  const std::string head = file_head(path);
  if (auto kind = not_text(head))
    return kind;
  if (head.starts_with("\xff\xfe") || head.starts_with("\xfe\xff"))
    return std::string("the file is UTF-16 text (it begins with a UTF-16 byte order mark), "
                       "which Flotilla does not read; convert it to UTF-8 (iconv -f utf-16 -t "
                       "utf-8)");
  // Without the mark: text whose every other byte is NUL (ASCII in UTF-16).
  if (const auto nuls = std::count(head.begin(), head.end(), '\0');
      head.size() >= 8 && nuls * 3 >= static_cast<std::ptrdiff_t>(head.size()))
    return std::string("the file looks like UTF-16 text without a byte order mark (every "
                       "other byte is NUL), which Flotilla does not read; convert it to UTF-8 "
                       "(iconv -f utf-16le -t utf-8, or utf-16be)");
  if (reason.find("Maximum line size") == std::string::npos &&
      reason.find("max_line_size") == std::string::npos)
    return std::nullopt;
  // DuckDB's default maximum_line_size: 2 MiB.
  constexpr std::size_t limit = 2 * 1024 * 1024;
  std::ifstream in(path, std::ios::binary);
  std::size_t line = 1, length = 0;
  // The record around it: a quoted value may hold line breaks, and DuckDB's limit is
  // on a record's bytes (its message then names another line and quotes the value).
  std::size_t record_line = 1, record_length = 0, long_record = 0;
  bool quoted = false;
  char c = 0;
  while (in.get(c)) {
    if (c == '"')
      quoted = !quoted;
    if (++record_length > limit && long_record == 0)
      long_record = record_line;
    if (c == '\n') {
      ++line;
      length = 0;
      if (!quoted) {
        record_line = line;
        record_length = 0;
      }
    } else if (++length > limit) {
      return fmt::format("line {} is longer than the 2 MiB DuckDB's reader takes for a line, "
                         "so the file cannot be loaded as it is; shorten the values on it (a "
                         "value that long belongs in a file of its own) or split the file",
                         line);
    }
  }
  if (long_record != 0)
    return fmt::format("the record that begins on line {} is longer than the 2 MiB DuckDB's "
                       "reader takes for a record (a quoted value in it spans lines), so the "
                       "file cannot be loaded as it is; shorten that value (a value that long "
                       "belongs in a file of its own) or split the file",
                       long_record);
  return std::nullopt;
}

/// Dates are inferred only from ISO dates (2024-03-15), timestamps only from ISO ones or
/// those that begin with the year: a date written day- or month-first (03/04/2024) may
/// read either way, and DuckDB's sniffer would guess the order from the file's values
/// (one file day-first, the next month-first once it holds 12/25/2024), changing dates
/// already loaded. Such columns are text, as written. The sniff and every read of a CSV
/// file say so. JSON's inference is given ISO dates; the timestamp columns it infers keep
/// their type only when every value begins with the year (year_first_timestamps); a read
/// that names every column's type parses them as DuckDB casts text (any ISO form).
/// A CSV file has no comments either (RFC 4180): left to the sniffer, a '#' could be taken
/// for one, and a row beginning with it (`#1002,7.50`) left out, a value holding it cut.
/// Its quote is the double quote (RFC 4180): left to the sniffer, a file whose values
/// hold single quotes ('A1') could be read with those as quotes, and the quotes removed.
constexpr const char* k_csv_sniff = "dateformat = '%Y-%m-%d', comment = '', quote = '\"'";
/// A timestamp's UTC offset at the end of its text (Z, +02, +02:00), as a DuckDB regex.
constexpr const char* k_utc_offset = "([zZ]|[+-][0-9]{2}(:?[0-9]{2})?)$";
constexpr const char* k_json_iso = "dateformat = 'iso'";

/// The arguments every sniff and read of a CSV file gives DuckDB's reader: k_csv_sniff,
/// and for a file whose header line holds no delimiter (one column), the comma. Left to
/// the sniffer, the values of a one-column file that hold a ';' (a URL's query) or a '|'
/// would be split on it, and the header taken from a later line.
std::string csv_args(const std::string& path) {
  if (header_delimiter(path).second != 1)
    return k_csv_sniff;
  // A title above a header ("Report", then "id;name") has one field too: its next line
  // splits on another delimiter into names, and a line after that has a value that is
  // no name (a number, a date). Left to the sniffer, which fails it naming the title.
  std::ifstream in(path, std::ios::binary);
  std::string first, second, third;
  std::getline(in, first);
  std::getline(in, second);
  std::getline(in, third);
  const auto fields_of = [](const std::string& line, char d) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (const char c : line) {
      if (c == '"')
        quoted = !quoted;
      else if (!quoted && c == d)
        out.emplace_back();
      else if (c != '\r')
        out.back() += c;
    }
    return out;
  };
  static const std::regex name(R"(\s*"?[A-Za-z_][A-Za-z0-9_ .\-]*"?\s*)");
  const auto all_names = [&](const std::vector<std::string>& f) {
    return std::all_of(f.begin(), f.end(),
                       [&](const std::string& v) { return std::regex_match(v, name); });
  };
  for (const char d : {';', '\t', '|', ','}) {
    const auto header = fields_of(second, d);
    if (header.size() < 2 || !all_names(header))
      continue;
    const auto row = fields_of(third, d);
    if (row.size() == header.size() && !all_names(row))
      return k_csv_sniff;  // a title, then a header and its rows
  }
  return fmt::format("{}, delim = ','", k_csv_sniff);
}

/// Whether `path` names a compressed file: `orders.csv.gz`, `events.ndjson.zst`.
/// A path's extension in lower case (".GZ" is ".gz").
std::string lower_extension(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

bool compressed(const fs::path& path) {
  const std::string ext = lower_extension(path);
  return ext == ".gz" || ext == ".zst";
}

/// Writes the bytes of the compressed file `from` to `to`, unpacked (gzip, several members
/// included, or zstd). Throws source_error naming `from` when it is not what its name says.
void unpack(const std::string& source, const std::string& from, const std::string& to) {
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  if (!out)
    throw error::cannot_open(source, fmt::format("a directory for the unpacked copy of {}", from),
                             std::strerror(errno), "check the space and permissions of TMPDIR");
  const auto failed = [&](const std::string& why) {
    return error::cannot_open(source, from, why,
                              "check the file: its name says it is compressed (.gz: gzip, "
                              ".zst: zstd); rename it if it is not");
  };
  std::vector<char> buf(1 << 17);
  if (lower_extension(from) == ".gz") {
    gzFile in = gzopen(from.c_str(), "rb");
    if (in == nullptr)
      throw failed(std::strerror(errno));
    gzbuffer(in, 1 << 17);
    int n = 0;
    while ((n = gzread(in, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
      if (gzdirect(in) != 0) {  // zlib passes bytes that are no gzip through as they are
        gzclose(in);
        throw failed("not a gzip file");
      }
      out.write(buf.data(), n);
    }
    int code = Z_OK;
    const char* message = gzerror(in, &code);
    const std::string why = message != nullptr && *message != '\0' ? message : "read error";
    gzclose(in);  // frees gzerror's text: copied above
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END))
      throw failed(fmt::format("not a whole gzip file, or a damaged one ({})", why));
  } else {
    std::ifstream in(from, std::ios::binary);
    if (!in)
      throw failed(std::strerror(errno));
    std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> z(ZSTD_createDCtx(), ZSTD_freeDCtx);
    std::vector<char> unpacked(ZSTD_DStreamOutSize());
    std::size_t last = 0;
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
      ZSTD_inBuffer input{buf.data(), static_cast<std::size_t>(in.gcount()), 0};
      while (input.pos < input.size) {
        ZSTD_outBuffer output{unpacked.data(), unpacked.size(), 0};
        last = ZSTD_decompressStream(z.get(), &output, &input);
        if (ZSTD_isError(last))
          throw failed(fmt::format("not a zstd file ({})", ZSTD_getErrorName(last)));
        out.write(unpacked.data(), static_cast<std::streamsize>(output.pos));
      }
    }
    if (last != 0)
      throw failed("the zstd file is cut short");
  }
  out.flush();
  if (!out)
    throw error::cannot_open(source, fmt::format("the unpacked copy of {} ({})", from, to),
                             "write failed", "check the space of TMPDIR");
}

class file_source final : public source {
 public:
  explicit file_source(source_options options)
      : options_(std::move(options)), json_(options_.adapter == "json") {}
  ~file_source() override {
    if (!unpack_dir_.empty()) {
      std::error_code ec;
      fs::remove_all(unpack_dir_, ec);
    }
  }
  file_source(const file_source&) = delete;
  file_source& operator=(const file_source&) = delete;

  [[nodiscard]] std::string_view adapter() const override { return json_ ? "json" : "csv"; }
  /// A kept catalog holds what DuckDB's reader inferred: another DuckDB infers again.
  [[nodiscard]] std::string_view catalog_version() const override {
    static const std::string version =
        fmt::format("file-catalog/2;duckdb {}", duckdb_library_version());
    return version;
  }
  [[nodiscard]] bool reuses_known_tables() const override { return true; }
  void known_tables(catalog earlier) override {
    known_.clear();
    for (auto& t : earlier.tables)
      if (t.marker && t.unreadable.empty() && (json_ || !t.reader.empty()))
        known_.emplace(t.name, std::move(t));
  }

  [[nodiscard]] catalog read_catalog() override {
    auto out = naming_originals([&] { return read_catalog_files(); });
    if (!original_of_.empty())
      for (auto& t : out.tables)
        t.unreadable = with_originals(std::move(t.unreadable));
    return out;
  }

  [[nodiscard]] catalog read_catalog_files() {
    catalog out;
    for (const auto& [name, path] : files()) {
      // The marker first: a write that lands after this point changes the next marker.
      // An unpacked copy's: its file's version as it was when unpacked, not now (a file
      // replaced since would pair these columns with the new file's version).
      const std::optional<std::string> file = marker_of(path);
      // An unchanged file: its table as an earlier run inferred it from every row.
      if (auto k = known_.find(name); file && k != known_.end() &&
                                      k->second.marker->starts_with(*file + ";s:")) {
        out.tables.push_back(std::move(k->second));
        known_.erase(k);
        continue;
      }
      source_table t;
      t.name = name;
      t.inferred = true;
      shape_hash shape;
      // A file with nothing in it (0 bytes, or only white space; for JSON also `[]`) has
      // no header and no keys: DuckDB would invent a column (column0, json) that the
      // target would keep for good, and empty the table. It fails instead.
      if (empty_file(path, json_)) {
        t.unreadable = error::read_failed(
                           options_.name, name, path,
                           "the file is empty: it has no header (or records), so its columns "
                           "are unknown; nothing was loaded and the target table stays as last "
                           "copied",
                           json_ ? "write the file again with its records, or move it out of "
                                   "the source's path"
                                 : "write the file again with its header, or move it out of "
                                   "the source's path")
                           .what();
        out.tables.push_back(std::move(t));
        continue;
      }
      if (auto kind = not_text(file_head(path))) {
        t.unreadable = error::read_failed(options_.name, name, path, *kind,
                                          "move it out of the source's path")
                           .what();
        out.tables.push_back(std::move(t));
        continue;
      }
      std::vector<std::pair<std::string, std::string>> described;
      try {
        described = describe(name, path, &t.reader);
      } catch (const source_error& e) {
        // One malformed file fails its own table, not the source's others.
        t.unreadable = e.what();
        out.tables.push_back(std::move(t));
        continue;
      }
      if (auto renamed = renamed_column(path, json_, described)) {
        t.unreadable = error::read_failed(options_.name, name, path, *renamed, fix_file).what();
        out.tables.push_back(std::move(t));
        continue;
      }
      t.no_rows = !json_ && header_only(path);
      for (auto& [column, declared] : described) {
        schema::column c;
        c.name = column;
        c.type = map_duckdb_type(declared);
        shape.add(column);
        shape.add(declared);
        t.columns.columns.push_back(std::move(c));
      }
      if (file)
        t.marker = *file + ";s:" + shape.hex();
      out.tables.push_back(std::move(t));
    }
    return out;
  }

  std::vector<std::optional<decimal_digits>> decimal_fit(
      const source_table& table, const std::vector<std::string>& columns) override {
    return naming_originals([&] { return file_decimal_fit(table, columns); });
  }

  std::vector<std::optional<decimal_digits>> file_decimal_fit(
      const source_table& table, const std::vector<std::string>& columns) {
    std::vector<std::optional<decimal_digits>> out(columns.size());
    if (columns.empty())
      return out;
    const std::string path = file_of(table.name);
    // The text each value was written as: a CSV file's own; JSON's numbers as their
    // shortest spelling (12.50 reads 12.5, as JSON means the same number).
    std::string select;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const std::string v = fmt::format("trim(CAST({} AS VARCHAR))", quote_ident(columns[i]));
      select += fmt::format(
          "{}CAST(bool_and({} IS NULL OR regexp_full_match({}, "
          "'[-+]?([0-9]+([.][0-9]*)?|[.][0-9]+)')) AS VARCHAR), "
          "CAST(coalesce(max(length(ltrim(regexp_replace(split_part({}, '.', 1), '[-+]', ''), "
          "'0'))), 0) AS VARCHAR), "
          "CAST(coalesce(max(length({}) - strpos({}, '.')) FILTER (WHERE strpos({}, '.') > 0), "
          "0) AS VARCHAR), "
          "CAST(coalesce(max(length(ltrim(regexp_replace({}, '[-+.]', '', 'g'), '0'))), 0) "
          "AS VARCHAR), "
          "CAST(bool_and({} IS NULL OR strpos({}, '.') = 0 OR "
          "regexp_full_match(split_part({}, '.', 2), '0*')) AS VARCHAR)",
          i ? ", " : "", v, v, v, v, v, v, v, v, v, v);
    }
    const auto row = aggregates(table, path, select);
    if (!row)
      return out;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      if ((*row)[5 * i].value_or("false") != "true")
        continue;
      const int significant = std::stoi((*row)[5 * i + 3].value_or("0"));
      const decimal_digits d{std::stoi((*row)[5 * i + 1].value_or("0")),
                             std::stoi((*row)[5 * i + 2].value_or("0")), significant,
                             (*row)[5 * i + 4].value_or("false") == "true"};
      // JSON numbers arrive as doubles, exact to 15 significant digits: a longer one may
      // have lost digits already, so no decimal is claimed for it.
      if (!json_ || (significant <= 15 && d.integer + d.scale <= 38))
        out[i] = d;
    }
    return out;
  }

  std::vector<bool> valueless(const source_table& table,
                              const std::vector<std::string>& columns) override {
    return naming_originals([&] { return file_valueless(table, columns); });
  }

  std::vector<bool> file_valueless(const source_table& table,
                                   const std::vector<std::string>& columns) {
    std::vector<bool> out(columns.size(), false);
    std::string select;
    for (const auto& c : columns)
      select += fmt::format("{}CAST(count({}) = 0 AS VARCHAR)", select.empty() ? "" : ", ",
                            quote_ident(c));
    if (select.empty())
      return out;
    if (const auto row = aggregates(table, file_of(table.name), select))
      for (std::size_t i = 0; i < out.size() && i < row->size(); ++i)
        out[i] = (*row)[i].value_or("false") == "true";
    return out;
  }

  /// Whether the file may hold a number a double does not keep: a run of 16 digits, or an
  /// exponent of 3 digits (1e400 is past a double's range, 1e-400 below it).
  static bool may_hold_long_numbers(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::array<char, 1 << 16> buf{};
    std::size_t run = 0;
    int exponent = -1;  // digits after an 'e' (and its sign); -1: not in an exponent
    char last = 0;
    while (in) {
      in.read(buf.data(), buf.size());
      const auto n = static_cast<std::size_t>(in.gcount());
      for (std::size_t i = 0; i < n; ++i) {
        const char c = buf[i];
        if (c >= '0' && c <= '9') {
          if (++run >= 16)
            return true;
          if (exponent >= 0 && ++exponent >= 3)
            return true;
        } else if (c != '.') {
          run = 0;
          const bool digit_before = last >= '0' && last <= '9';
          if ((c == 'e' || c == 'E') && (digit_before || last == '.'))
            exponent = 0;
          else if (!((c == '+' || c == '-') && (last == 'e' || last == 'E') && exponent == 0))
            exponent = -1;
        }
        last = c;
      }
    }
    return false;
  }

  std::vector<std::optional<unfit_value>> unfit_values(
      const source_table& table, const std::vector<schema::column>& declared) override {
    auto out = naming_originals([&] { return file_unfit_values(table, declared); });
    for (auto& v : out)
      if (v)
        v->where = with_originals(std::move(v->where));
    return out;
  }

  std::vector<std::optional<unfit_value>> file_unfit_values(
      const source_table& table, const std::vector<schema::column>& declared) {
    std::vector<std::optional<unfit_value>> out(declared.size());
    std::string select;
    std::vector<std::size_t> asked;
    for (std::size_t i = 0; i < declared.size(); ++i) {
      const auto& t = declared[i].type;
      // A JSON column mixing numbers and strings reads as JSON, its strings quoted: a
      // number written as a string ("12.50") is checked as the number it spells.
      const std::string v =
          json_ ? fmt::format("trim(regexp_replace(CAST({} AS VARCHAR), '^\"(.*)\"$', '\\1'))",
                              quote_ident(declared[i].name))
                : fmt::format("trim(CAST({} AS VARCHAR))", quote_ident(declared[i].name));
      std::string fits;
      using k = schema::type_kind;
      switch (t.kind) {
        case k::smallint:
        case k::int32:
        case k::bigint:
          fits = fmt::format("regexp_full_match({0}, '[-+]?[0-9]+([.]0*)?') AND "
                             "TRY_CAST({0} AS {1}) IS NOT NULL",
                             v, t.kind == k::smallint ? "SMALLINT"
                                : t.kind == k::int32  ? "INTEGER"
                                                      : "BIGINT");
          break;
        case k::decimal:
          // Past 38 digits DuckDB has no decimal to try: the digits are counted instead.
          fits = t.precision <= 38
                     ? fmt::format("regexp_full_match({0}, '[-+]?([0-9]+([.][0-9]*)?|[.][0-9]+)') "
                                   "AND length(rtrim(split_part({0}, '.', 2), '0')) <= {2} AND "
                                   "TRY_CAST({0} AS DECIMAL({1},{2})) IS NOT NULL",
                                   v, t.precision, t.scale)
                     : fmt::format("regexp_full_match({0}, '[-+]?([0-9]+([.][0-9]*)?|[.][0-9]+)') "
                                   "AND length(rtrim(split_part({0}, '.', 2), '0')) <= {2} AND "
                                   "length(ltrim(regexp_replace(split_part({0}, '.', 1), '[-+]', "
                                   "''), '0')) <= {1} - {2}",
                                   v, t.precision, t.scale);
          break;
        case k::boolean:
          // What DuckDB's cast reads as a boolean, as its sniffer infers one (a column of
          // true and yes infers BOOLEAN): the same texts pass whatever the other rows hold.
          fits = fmt::format(
              "lower({}) IN ('true', 'false', 't', 'f', '1', '0', 'yes', 'no', 'y', 'n')", v);
          break;
        case k::date:
          // A date with a time of day, which a date column would drop (a value that is no
          // date at all fails the read, naming it).
          fits = fmt::format("NOT (regexp_matches({0}, '[0-9]:[0-9]{{2}}') AND "
                             "TRY_CAST({0} AS TIMESTAMP) IS NOT NULL)",
                             v);
          break;
        case k::timestamp_ntz:
          // A time of day with a UTC offset (Z, +02, +02:00), which DuckDB's parse (as
          // PostgreSQL's) would drop, reading 10:00+02:00 as 10:00.
          fits = fmt::format("NOT regexp_matches({}, '[0-9]:[0-9]{{2}}(:[0-9]{{2}}([.][0-9]*)?)?"
                             "\\s*{}')",
                             v, k_utc_offset);
          break;
        default: continue;
      }
      // The first such value in file order, and its data row.
      const std::string unfit = fmt::format("{} IS NOT NULL AND NOT ({})", v, fits);
      select += fmt::format("{}arg_min({}, __flotilla_row) FILTER (WHERE {}), "
                            "CAST(min(__flotilla_row) FILTER (WHERE {}) AS VARCHAR)",
                            asked.empty() ? "" : ", ", v, unfit, unfit);
      asked.push_back(i);
    }
    if (asked.empty())
      return out;
    const std::string path = file_of(table.name);
    const auto row = aggregates(table, path, select, "row_number() OVER () AS __flotilla_row, *");
    if (row)
      for (std::size_t j = 0; j < asked.size(); ++j)
        if ((*row)[2 * j]) {
          std::string where = path;
          if (const auto& at = (*row)[2 * j + 1])
            where += json_ ? fmt::format(", record {}", *at)
                           : fmt::format(", data row {} (after the header)", *at);
          out[asked[j]] = unfit_value{*(*row)[2 * j], std::move(where)};
        }
    return out;
  }

  read_result read(const read_request& request, const batch_consumer& consume) override {
    return naming_originals([&] { return read_file(request, consume); });
  }

  read_result read_file(const read_request& request, const batch_consumer& consume) {
    if (request.table == nullptr)
      throw error::bad_request(options_.name, "read request names no table");
    const std::string path = file_of(request.table->name);
    // The file as the catalog read it: one written to or replaced since would be parsed
    // with the columns, types and dialect found in the file before (a header in another
    // order swaps values), and was planned with them. Checked before and after the scan.
    const auto changed = [&] {
      if (!request.table->marker)
        return false;
      const auto now = data_file_marker(original_of(path));
      return !now || !request.table->marker->starts_with(*now + ";s:");
    };
    const auto fail_changed = [&] {
      throw error::read_failed(options_.name, request.table->name, path,
                               "the file changed after this run read its columns (it was "
                               "written to or replaced during the run), so none of its rows "
                               "were loaded: they would have been read with the columns and "
                               "types of the file before",
                               "run again once the file is complete: the next run reads it as "
                               "it is then");
    };
    if (changed())
      fail_changed();
    if (!json_ && !request.cursor_column.empty())
      if (auto cut = unterminated_last_line(path))
        throw error::read_failed(options_.name, request.table->name, original_of(path), *cut,
                                 "end the file with a line break once its last row is "
                                 "complete; a file still being written: run again once it is");
    duck::scan_spec spec;
    spec.relation = relation(path, request);
    spec.request = &request;
    spec.source = options_.name;
    spec.table = request.table->name;
    spec.where = path;
    spec.fix = fix_file;
    if (json_)
      spec.explain = [path](std::string reason) { return json_reason(path, std::move(reason)); };
    try {
      duck::connection con(db());
      if (!json_) {
        if (request.table->reader.empty())  // else checked by the catalog's describe
          check_quotes(con, path);
        check_long_numbers(con, path, request);
        if (auto keeping = keeping_empty_strings(con, path, request))
          spec.relation = std::move(*keeping);
      }
      else if (auto cut = unclosed_array(path))
        throw error::read_failed(options_.name, request.table->name, path, *cut, fix_file);
      if (json_) {
        const auto float_column = [&](const std::string& name) {
          const auto* c = request.columns.find(name, schema::name_rule::case_sensitive);
          if (c == nullptr)
            c = request.table->columns.find(name, schema::name_rule::case_sensitive);
          return c != nullptr && (c->type.kind == schema::type_kind::float64 ||
                                  c->type.kind == schema::type_kind::float32);
        };
        std::string column;
        bool nested = false, null_record = false;
        if (auto lost = json_lost_digits(path, float_column, column, nested, null_record)) {
          if (null_record)
            throw error::read_failed(
                options_.name, request.table->name, path,
                *lost + ": every line of a JSON-lines file, or every element of a file that "
                        "is one JSON array, must be one record (an object of column names and "
                        "values)",
                fix_file);
          // Read as text already (a pin): only the file can keep the digits.
          const auto* read_as = request.columns.find(column, schema::name_rule::case_sensitive);
          const bool as_text = read_as != nullptr && (read_as->type.kind == schema::type_kind::text ||
                                                      read_as->type.kind == schema::type_kind::varchar);
          throw error::read_failed(
              options_.name, request.table->name, path, *lost,
              !nested && as_text
                  ? fmt::format("write that number as a JSON string (its digits in double "
                                "quotes), which the text column '{}' keeps exactly: a JSON "
                                "number is read as a double before it becomes text",
                                column)
              : nested ? fmt::format("write that number as a JSON string inside the value of "
                                   "'{}' (\"0.1000000000000000055511151231257827\"), which "
                                   "keeps its digits, or leave it out of the file",
                                   column)
                     : fmt::format("write the value as a JSON string "
                                   "(\"12345678901234567.123456789\"), which loads exactly, and "
                                   "pin the column's type in flotilla.toml ([sources.{}.tables."
                                   "\"{}\"] columns = {{ {} = \"decimal(p,s)\" }}, or "
                                   "{{ {} = \"text\" }})",
                                   options_.name, request.table->name, schema::toml_key(column),
                                   schema::toml_key(column)));
        }
      }
      // DuckDB reads a blank line of a one-column file as a row holding NULL (of a file
      // of more columns it skips it): a trailing blank line an editor left was a row. Such
      // lines are not rows here either (a one-column file's NULL is nothing else).
      if (!json_ && request.table->columns.columns.size() == 1 && has_blank_line(path))
        spec.relation = fmt::format("(SELECT * FROM {} WHERE {} IS NOT NULL)", spec.relation,
                                    quote_ident(request.table->columns.columns[0].name));
      auto result = duck::scan(con, spec, consume);
      if (changed())
        fail_changed();
      return result;
    } catch (const duck::failure& e) {
      // A file replaced during the scan fails it with a value of the new file that does
      // not fit the old one's columns: the change is the cause, not the value.
      if (changed())
        fail_changed();
      if (auto c = conversion_error(e.what(), options_.name, request.table->name,
                                    json_ ? std::string() : path))
        throw error::read_failed(options_.name, request.table->name, path, c->first, c->second);
      if (json_) {
        out_of_range_number(path, request.table->name, e.what());
        unparsed_json_value(path, request, e.what());
      }
      throw error::read_failed(options_.name, request.table->name, path,
                               json_ ? json_reason(path, e.what()) : std::string(e.what()),
                               fix_file);
    } catch (const source_error& e) {
      if (changed())
        fail_changed();
      if (auto c = conversion_error(e.what(), options_.name, request.table->name,
                                    json_ ? std::string() : path))
        throw error::read_failed(options_.name, request.table->name, path, c->first, c->second);
      if (json_) {
        out_of_range_number(path, request.table->name, e.what());
        unparsed_json_value(path, request, e.what());
      }
      throw;
    }
  }

  /// DuckDB's JSON reader's complaint about a value it could not parse as its column's
  /// type ("JSON transform error ... in line 1: invalid date field format"), which names
  /// neither the column nor the record (its line is approximate), in Flotilla's terms: the
  /// first such value of the columns read as a type other than text, its record, and the
  /// pin that reads it. One scan per such column, only for a read that failed so. Returns
  /// when no value is found.
  void unparsed_json_value(const std::string& path, const read_request& request,
                           const std::string& what) {
    if (what.find("transform error") == std::string::npos &&
        what.find("Could not convert") == std::string::npos &&
        what.find("Conversion Error") == std::string::npos)
      return;
    const source_table& table = *request.table;
    for (const auto& c : request.columns.columns) {
      const std::string t = duckdb_parse_type(c.type);
      if (t.empty() || t == "VARCHAR" || c.type.kind == schema::type_kind::json)
        continue;
      const std::string fails = fmt::format(
          "__flotilla_value IS NOT NULL AND TRY_CAST(__flotilla_value AS {}) IS NULL", t);
      std::optional<std::vector<std::optional<std::string>>> row;
      try {
        row = aggregates(
            table, path,
            fmt::format("CAST(min(__flotilla_row) FILTER (WHERE {0}) AS VARCHAR), "
                        "arg_min(__flotilla_value, __flotilla_row) FILTER (WHERE {0})",
                        fails),
            fmt::format("row_number() OVER () AS __flotilla_row, trim(regexp_replace(CAST({} "
                        "AS VARCHAR), '^\"(.*)\"$', '\\1')) AS __flotilla_value",
                        quote_ident(c.name)));
      } catch (const source_error&) {
        return;  // the file cannot be read as inferred either: DuckDB's reason stands
      }
      if (!row || row->size() != 2 || !(*row)[0] || !(*row)[1])
        continue;
      std::string type = t;
      for (auto& ch : type)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      const auto* inferred = table.columns.find(c.name, schema::name_rule::case_sensitive);
      const bool pinned = inferred == nullptr || inferred->type != c.type;
      throw error::read_failed(
          options_.name, table.name, path,
          fmt::format("record {}: column '{}' holds '{}', which is not a {} ({})", *(*row)[0],
                      c.name, *(*row)[1], type,
                      pinned ? "the type flotilla.toml declares for it"
                             : "the type inferred from the file"),
          fmt::format("fix the value, or {} in flotilla.toml ({} "
                      "columns = {{ {} = \"text\" }})",
                      pinned ? "declare the column as text" : "pin the column's type",
                      schema::table_header(options_.name, table.name), schema::toml_key(c.name)));
    }
  }

  /// DuckDB's JSON reader's "Failed to cast value to numerical: N" in Flotilla's terms: the
  /// column holding N and the pin that reads it. Returns when the column is not found.
  void out_of_range_number(const std::string& path, const std::string& table,
                           const std::string& what) {
      static const std::regex numerical(R"(Failed to cast value to numerical: ([-+0-9.eE]+))");
      std::smatch m;
      if (json_ && std::regex_search(what, m, numerical)) {
        const std::string column = json_column_of_number(path, m[1].str());
        if (!column.empty())
          throw error::read_failed(
              options_.name, table, path,
              fmt::format("column '{}' holds the number {}, past the range of the type the "
                          "reader inferred from the file",
                          column, m[1].str()),
              fmt::format("pin the column's type in flotilla.toml ({} "
                          "columns = {{ {} = \"text\" }}, or a decimal wide enough)",
                          schema::table_header(options_.name, table), schema::toml_key(column)));
      }
  }

 private:
  /// One row of aggregates `select` over the file's values as text (CSV read all as
  /// VARCHAR; JSON as DuckDB reads it, cast by `select`); nullopt for no row.
  /// `select` over the file's rows (as text, CSV), or over `inner` selected from them
  /// when given (a subquery, for expressions the aggregates then read by alias).
  std::optional<std::vector<std::optional<std::string>>> aggregates(const source_table& source,
                                                                    const std::string& path,
                                                                    const std::string& select,
                                                                    const std::string& inner = {}) {
    const std::string& table = source.name;
    // JSON with the columns as inferred: the reader then infers nothing again.
    std::string from =
        json_ ? json_relation(path, source.columns) : text_relation(path, source);
    if (!inner.empty())
      from = fmt::format("(SELECT {} FROM {})", inner, from);
    try {
      duck::connection con(db());
      auto rows = con.strings(fmt::format("SELECT {} FROM {}", select, from));
      if (rows.size() != 1)
        return std::nullopt;
      return std::move(rows[0]);
    } catch (const duck::failure& e) {
      throw error::read_failed(options_.name, table, path,
                               json_ ? json_reason(path, e.what()) : std::string(e.what()),
                               fix_file);
    }
  }

  /// A CSV file's values as the text they are written as: every column VARCHAR.
  [[nodiscard]] static std::string text_relation(const std::string& path, const source_table& table) {
    if (auto r = described_relation(path, table, nullptr, true))
      return *r;
    return fmt::format("read_csv({}, sample_size = -1, all_varchar = true, {})",
                       quote_literal(path), csv_args(path));
  }

  /// In any case: `ORDERS.CSV`, as Windows tools write it, is a table as orders.csv is.
  [[nodiscard]] bool wanted_extension(const fs::path& p) const {
    const std::string ext = lower_extension(p);
    if (json_)
      return ext == ".json" || ext == ".ndjson" || ext == ".jsonl";
    return ext == ".csv";
  }

  // Table name -> file, sorted by name.
  [[nodiscard]] std::map<std::string, std::string> files() const {
    std::map<std::string, std::string> out;
    std::error_code ec;
    const fs::path root(options_.path);
    if (fs::is_regular_file(root, ec)) {
      // orders.csv.gz is the table orders, as orders.csv is, read from an unpacked copy.
      fs::path stem = root.stem();
      if (compressed(root))
        stem = stem.stem();
      out.emplace(stem.string(), readable(root.string()));
      return out;
    }
    if (!fs::is_directory(root, ec))
      throw error::cannot_open(options_.name, fmt::format("{} path {}", adapter(), options_.path),
                               "no such file or directory", "check path");
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path p = it->path();
      // Hidden files are no tables: `._orders.csv` (the metadata a Mac copies beside
      // each file), an editor's or a sync tool's `.orders.csv` while it writes.
      if (!it->is_regular_file(ec) || !wanted_extension(p) || p.filename().string().starts_with('.'))
        continue;
      auto [pos, fresh] = out.emplace(p.stem().string(), globless(p.string()));
      if (!fresh)
        throw error::catalog_failed(
            options_.name, options_.path,
            fmt::format("files {} and {} would both form table '{}'", pos->second, p.string(),
                        pos->first),
            "rename or remove one of them");
    }
    if (ec)
      throw error::cannot_open(options_.name, fmt::format("{} path {}", adapter(), options_.path),
                               ec.message(), "check path and permissions");
    return out;
  }

  /// The file to read for `path`: itself, or for a compressed one (`orders.csv.gz`) an
  /// unpacked copy, made once per process and file version. Every check and read of a
  /// file works on its bytes (the header, quotes, a JSON file's lines): on the compressed
  /// bytes they saw nothing, and DuckDB's reader alone loaded what it guessed.
  [[nodiscard]] std::string readable(const std::string& path) const {
    if (!compressed(path))
      return globless(path);
    std::lock_guard lock(unpack_mutex_);
    const auto version = data_file_marker(path).value_or("");
    if (auto it = unpacked_of_.find(path); it != unpacked_of_.end() && it->second.first == version)
      return it->second.second;
    make_unpack_dir();
    // The name keeps the inner extension (.csv, .ndjson): reads go by it.
    const std::string to =
        (fs::path(unpack_dir_) /
         fmt::format("{}-{}", ++unpacked_count_, without_glob(fs::path(path).stem().string())))
            .string();
    unpack(options_.name, path, to);
    unpacked_of_[path] = {version, to};
    original_of_[to] = path;
    return to;
  }

  /// DuckDB's readers take a path holding `*`, `?`, `[` or `{` for a pattern: the file
  /// `orders[1].csv` would be read as `orders1.csv`, another file, and `ev*.ndjson` as
  /// every file it matches. Such a file is read through a link of a plain name in the
  /// temporary directory (reads follow it to the file, as it is then); messages name the
  /// file. Other paths are returned as they are.
  [[nodiscard]] std::string globless(const std::string& path) const {
    if (path.find_first_of("*?[]{}") == std::string::npos)
      return path;
    std::lock_guard lock(unpack_mutex_);
    if (auto it = linked_of_.find(path); it != linked_of_.end())
      return it->second;
    make_unpack_dir();
    const std::string to =
        (fs::path(unpack_dir_) /
         fmt::format("{}-{}", ++unpacked_count_, without_glob(fs::path(path).filename().string())))
            .string();
    std::error_code ec;
    fs::create_symlink(fs::absolute(path, ec), to, ec);
    if (ec)
      throw error::cannot_open(options_.name, fmt::format("a link to {} under {}", path, unpack_dir_),
                               ec.message(), "check the space and permissions of TMPDIR");
    linked_of_[path] = to;
    original_of_[to] = path;
    return to;
  }

  static std::string without_glob(std::string name) {
    for (char& c : name)
      if (std::string_view("*?[]{}").find(c) != std::string_view::npos)
        c = '_';
    return name;
  }

  /// The temporary directory of unpacked copies and links, made once. Called locked.
  void make_unpack_dir() const {
    if (unpack_dir_.empty()) {
      std::error_code ec;
      fs::path dir = fs::temp_directory_path(ec);
      if (ec)
        dir = "/tmp";
      std::string tmpl = (dir / "flotilla-unpacked-XXXXXX").string();
      if (mkdtemp(tmpl.data()) == nullptr)
        throw error::cannot_open(options_.name, "a directory for unpacked files under " + dir.string(),
                                 std::strerror(errno), "check the space and permissions of TMPDIR");
      unpack_dir_ = tmpl;
    }
  }

  /// The change marker of the file `path` reads: an unpacked copy's is its compressed
  /// file's, as it was when unpacked.
  [[nodiscard]] std::optional<std::string> marker_of(const std::string& path) const {
    {
      std::lock_guard lock(unpack_mutex_);
      if (auto o = original_of_.find(path); o != original_of_.end())
        if (auto u = unpacked_of_.find(o->second); u != unpacked_of_.end() && u->second.second == path)
          return u->second.first.empty() ? std::nullopt : std::optional<std::string>(u->second.first);
    }
    return data_file_marker(path);
  }

  /// The file the user named for `path`, an unpacked copy's compressed file.
  [[nodiscard]] std::string original_of(const std::string& path) const {
    std::lock_guard lock(unpack_mutex_);
    const auto it = original_of_.find(path);
    return it == original_of_.end() ? path : it->second;
  }

  /// `text` naming the user's files: an unpacked copy's path replaced by its file's.
  [[nodiscard]] std::string with_originals(std::string text) const {
    std::lock_guard lock(unpack_mutex_);
    for (const auto& [copy, original] : original_of_)
      for (auto at = text.find(copy); at != std::string::npos; at = text.find(copy, at + original.size()))
        text.replace(at, copy.size(), original);
    return text;
  }

  /// `body()`, its errors naming the user's files.
  template <class F>
  std::invoke_result_t<F> naming_originals(F&& body) const {
    try {
      return body();
    } catch (const source_error& e) {
      if (original_of_.empty())
        throw;
      throw source_error(with_originals(e.what()));
    }
  }

  [[nodiscard]] std::string file_of(const std::string& table) const {
    std::error_code ec;
    const fs::path root(options_.path);
    if (fs::is_regular_file(root, ec))
      return readable(root.string());
    static constexpr std::array<std::string_view, 3> json_exts{".json", ".ndjson", ".jsonl"};
    static constexpr std::array<std::string_view, 1> csv_exts{".csv"};
    const std::span<const std::string_view> exts =
        json_ ? std::span<const std::string_view>(json_exts) : std::span<const std::string_view>(csv_exts);
    for (std::string_view ext : exts) {
      fs::path p = root / (table + std::string(ext));
      if (fs::is_regular_file(p, ec))
        return globless(p.string());
    }
    // An extension in another case (ORDERS.CSV): the directory's listing has it.
    const auto all = files();
    if (const auto it = all.find(table); it != all.end())
      return it->second;
    throw error::read_failed(options_.name, table, options_.path,
                             fmt::format("no {} file for table '{}'", adapter(), table),
                             "check that the file still exists");
  }

  /// The file as DuckDB's reader infers it, from every row (`sample_size = -1`; every
  /// read of a file says so, so all of them agree): inferred from its first 20,480 rows
  /// only, a later value the guess did not foresee was cast to it, silently when the cast
  /// succeeds (1.75 in a BIGINT column loaded 2, a date's time of day or a timestamp's
  /// offset dropped), and a JSON key first seen later was left out. Costs one more pass
  /// over a large file (measured: DESCRIBE of a 136 MB CSV, 0.6 s -> 3.0 s).
  [[nodiscard]] std::string relation(const std::string& path) const {
    // records = 'true': a value that is not an object (a line `[3, "c"]` or `42`) is an
    // error; left to DuckDB's guess, the whole file would read as one `json` column.
    // map_inference_threshold = -1: records of 200 keys or more whose values have one type
    // are records still, not one MAP (which records = 'true' then refused as no object).
    return json_ ? fmt::format("read_json_auto({}, sample_size = -1, records = 'true', "
                               "map_inference_threshold = -1{}, {})",
                               quote_literal(path), json_format(path), k_json_iso)
                 : fmt::format("read_csv({}, sample_size = -1, {})", quote_literal(path),
                               csv_args(path));
  }

  /// A JSON file read with its columns as inferred, and the values nested in a record
  /// (objects, arrays: portable json) read as JSON, as they are in the file: read as the
  /// STRUCT DuckDB infers, each object would get every key any of them has, NULL where it
  /// had none. The inferred relation when a column has no such DuckDB type.
  [[nodiscard]] std::string json_relation(const std::string& path,
                                          const schema::table_schema& inferred,
                                          const schema::table_schema* requested = nullptr) const {
    std::string columns;
    for (const auto& c : inferred.columns) {
      // A column pinned to another type is read as the pin says: text reads an integer
      // past 64 bits, which no number type of the reader holds, as the digits it is.
      const auto* pinned = requested ? requested->find(c.name, schema::name_rule::case_sensitive)
                                     : nullptr;
      const schema::portable_type& type = pinned ? pinned->type : c.type;
      const std::string t =
          type.kind == schema::type_kind::json ? "JSON" : duckdb_parse_type(type);
      if (t.empty())
        return relation(path);
      columns += fmt::format("{}{}: {}", columns.empty() ? "" : ", ", quote_literal(c.name),
                             quote_literal(t));
    }
    if (columns.empty())
      return relation(path);
    return fmt::format("read_json_auto({}, sample_size = -1, records = 'true', "
                       "map_inference_threshold = -1{}, columns = {{{}}})",
                       quote_literal(path), json_format(path), columns);
  }

  /// The relation a read scans: a CSV file's columns pinned to another type than the one
  /// inferred are parsed as that type (`types = {...}`), so a value the inference did not
  /// foresee (text further down a column of numbers) reads as the pin says.
  [[nodiscard]] std::string relation(const std::string& path, const read_request& request) const {
    if (json_)
      return json_relation(path, request.table->columns, &request.columns);
    if (auto r = described_relation(path, *request.table, &request.columns))
      return *r;
    std::string types;
    for (const auto& c : request.columns.columns) {
      const auto* inferred =
          request.table->columns.find(c.name, schema::name_rule::case_sensitive);
      if (inferred == nullptr || inferred->type == c.type)
        continue;
      const std::string t = duckdb_parse_type(c.type);
      if (t.empty())
        continue;
      types += fmt::format("{}{}: {}", types.empty() ? "" : ", ", quote_literal(c.name),
                           quote_literal(t));
    }
    if (types.empty())
      return relation(path);
    return fmt::format("read_csv({}, sample_size = -1, {}, types = {{{}}})", quote_literal(path),
                       csv_args(path), types);
  }

  /// A CSV file read with the dialect its catalog found (source_table::reader) and every
  /// column's type given: as `requested` reads it when it names the column, else as the
  /// catalog inferred it; all VARCHAR with `as_text`. The reader then sniffs nothing, where
  /// inferring from every row again would cost a pass over the file per read. `extra`:
  /// more read_csv arguments. nullopt: no dialect, or a type with no DuckDB name.
  [[nodiscard]] static std::optional<std::string> described_relation(
      const std::string& path, const source_table& table,
      const schema::table_schema* requested, bool as_text = false, std::string_view extra = {}) {
    if (table.reader.empty() || table.columns.columns.empty())
      return std::nullopt;
    std::string columns;
    for (const auto& c : table.columns.columns) {
      std::string t = "VARCHAR";
      if (!as_text) {
        const auto* r = requested ? requested->find(c.name, schema::name_rule::case_sensitive)
                                  : nullptr;
        t = r ? duckdb_parse_type(r->type) : std::string();
        if (t.empty())
          t = duckdb_parse_type(c.type);
        if (t.empty())
          return std::nullopt;
      }
      columns += fmt::format("{}{}: {}", columns.empty() ? "" : ", ", quote_literal(c.name),
                             quote_literal(t));
    }
    return fmt::format("read_csv({}, {}{}, columns = {{{}}})", quote_literal(path), table.reader,
                       extra, columns);
  }

  /// The DuckDB type a pinned CSV column is parsed as; empty: leave it to the inference.
  static std::string duckdb_parse_type(const schema::portable_type& t) {
    using k = schema::type_kind;
    switch (t.kind) {
      case k::varchar:
      case k::text: return "VARCHAR";
      case k::boolean: return "BOOLEAN";
      case k::smallint: return "SMALLINT";
      case k::int32: return "INTEGER";
      case k::bigint: return "BIGINT";
      case k::float32: return "FLOAT";
      case k::float64: return "DOUBLE";
      // DuckDB's decimals stop at 38 digits: a wider one is read as its text, exactly.
      case k::decimal:
        return t.precision <= 38 ? fmt::format("DECIMAL({},{})", t.precision, t.scale)
                                 : std::string("VARCHAR");
      case k::date: return "DATE";
      case k::timestamp_ntz: return "TIMESTAMP";
      case k::timestamp_tz: return "TIMESTAMPTZ";
      case k::time: return "TIME";
      case k::uuid: return "UUID";
      // A text's bytes are its UTF-8: read as text (DuckDB's BLOB parse would decode
      // \x41 escapes and refuse non-ASCII characters).
      case k::bytes: return "VARCHAR";
      default: return {};
    }
  }

  /// Column names and DuckDB types as DuckDB's reader infers them, from every row; for a
  /// CSV file also its dialect as read_csv arguments (`*dialect`), found by the same pass
  /// (sniff_csv), so a read parses the file as described without inferring it again.
  std::vector<std::pair<std::string, std::string>> describe(const std::string& table,
                                                            const std::string& path,
                                                            std::string* dialect) {
    const std::string sql =
        json_ ? fmt::format("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {})",
                            relation(path))
              : fmt::format("SELECT c.name, c.type, Delimiter, Quote, Escape, NewLineDelimiter, "
                            "Comment, CAST(SkipRows AS VARCHAR), CAST(HasHeader AS VARCHAR), "
                            "DateFormat, TimestampFormat FROM (SELECT unnest(Columns) AS c, * "
                            "FROM sniff_csv({}, sample_size = -1, header = true, {}))",
                            quote_literal(path), csv_args(path));
    std::vector<std::vector<std::optional<std::string>>> rows;
    // A UTF-16 file without its byte order mark (big-endian) sniffs as text with NULs in
    // its names: the encoding is said, not the names.
    if (!json_ && !compressed(path))
      if (const std::string head = file_head(path);
          head.size() >= 8 && std::count(head.begin(), head.end(), '\0') * 3 >=
                                  static_cast<std::ptrdiff_t>(head.size()))
        if (auto why = file_level_reason(path, ""))
          throw error::read_failed(options_.name, table, path, *why, fix_file);
    if (json_)
      if (auto deep = json_too_deep(path))
        throw error::read_failed(options_.name, table, path, *deep,
                                 "flatten that value, or write it as a JSON string (its text "
                                 "in double quotes), which loads as text");
    try {
      duck::connection con(db());
      rows = con.strings(sql);
      if (json_) {
        year_first_timestamps(con, path, rows);
        // An integer past a bigint's range in a column DuckDB infers BIGINT would fail
        // every read: such a column is typed decimal(20,0), as the CSV reader types it.
        if (std::any_of(rows.begin(), rows.end(),
                        [](const auto& r) { return r.size() > 1 && r[1] == "BIGINT"; }) &&
            may_hold_long_numbers(path)) {
          const auto wide = json_unsigned_columns(path);
          for (auto& r : rows)
            if (r.size() > 1 && r[1] == "BIGINT" && r[0] && wide.contains(*r[0]))
              r[1] = "DECIMAL(20,0)";
        }
      }
      if (!json_ && !rows.empty()) {
        // The first line is the header (header = true above: DuckDB's own guess takes a
        // header of numbers, 'region,2023,2024', for a row). A first line of numbers only
        // is a file without one: its first row would become column names.
        static const std::regex number(R"([-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?)");
        if (std::all_of(rows.begin(), rows.end(), [](const auto& r) {
              return std::regex_match(r[0].value_or(""), number);
            }) &&
            // A line with a surplus field near the end makes the sniffer take its names
            // from a later line: a first line that is names is read strictly, which
            // names the line at fault.
            (first_line_numbers_only(path) ||
             (strict_check(con, path, header_delimiter(path).first), false)))
          throw error::read_failed(
              options_.name, table, path,
              "its first line holds numbers only, no column names: the first line of a CSV "
              "file is its header",
              "add a header line naming the columns at the top of the file");
        // How sniff_csv spells "none": (empty).
        const auto option = [&](std::size_t i) {
          const std::string& v = rows[0][i].value_or("(empty)");
          return v == "(empty)" ? std::string() : v;
        };
        const std::string delim = option(2), quote = option(3);
        // The escape of a double quote is the quote doubled (RFC 4180): the sniffer's
        // guess, the backslash when a file has one `\"`, would have every quoted value
        // of the file lose its backslashes ("C:\Users" loaded as "C:Users"). Read so,
        // such a value closes its quote early and the read fails naming its line.
        *dialect = fmt::format("auto_detect = false, delim = {}, quote = {}, escape = {}, "
                               "comment = {}, skip = {}, header = {}",
                               quote_literal(delim), quote_literal(quote),
                               quote_literal(quote == "\"" ? quote : option(4)),
                               quote_literal(option(6)),
                               std::stoul(option(7).empty() ? "0" : option(7)),
                               option(8) == "true" ? "true" : "false");
        if (const std::string n = option(5); !n.empty())
          *dialect += fmt::format(", new_line = {}", quote_literal(n));
        // No dateformat: a read names every column's type, and a DATE column then holds
        // ISO dates only (the sniff's dateformat), which DuckDB's own cast reads, with
        // `infinity`, `-infinity` and `epoch`; read with a dateformat, DuckDB 1.4 turns
        // those into 1900-01-01.
        // A timestamp format the sniffer guessed that does not begin with the year
        // (03-20-2024 10:00:00 PM) may read day and month either way: its columns are
        // text, as written, like dates that are not ISO (k_csv_sniff).
        if (rows[0][10] && rows[0][10]->starts_with("%Y"))
          *dialect += fmt::format(", timestampformat = {}", quote_literal(*rows[0][10]));
        else if (rows[0][10]) {
          for (auto& row : rows)
            if (const std::string& type = row[1].value_or("");
                type == "TIMESTAMP" || type == "TIMESTAMP WITH TIME ZONE")
              row[1] = "VARCHAR";
          // That format applied to every timestamp column: an ISO one beside it read as
          // text. Its columns are typed again as the sniffer types ISO timestamps.
          iso_timestamps(con, path, *dialect, rows);
        }
        // A value that opens a double quote and never closes it makes the sniffer settle
        // on no quoting at all, and the file would load with the quote kept and the value
        // cut at the next delimiter. Such a file is read strictly with quoting, so it fails
        // naming the line instead.
        if (quote.empty() && quote_opens_a_value(path))
          strict_check(con, path, delim.size() == 1 ? delim[0] : ',');
        radix_text(con, path, *dialect, rows);
        wide_integers(con, path, *dialect, rows);
      }
      // A malformed row in the sample makes DuckDB's sniffer settle on a dialect in
      // which every row agrees: one column holding whole lines, or the rows from the
      // malformed one on, the lines before it skipped. Re-read such a file strictly with
      // its header's delimiter, so DuckDB names the offending line.
      // Both checks run only for such a file: the header is read only then.
      const std::size_t skip = json_ || rows.empty() ? 0 : std::stoul(rows[0][7].value_or("0"));
      if (!json_ && rows.size() == 1) {
        if (const auto [delim, fields] = header_delimiter(path); fields > 1) {
          strict_check(con, path, delim);
          // DuckDB's strict read takes a line that ends with a surplus delimiter (2,b,):
          // the sniffer did not, and found one column of whole lines. Named, not loaded.
          if (const auto bad = line_with_other_fields(path, delim, fields))
            throw error::read_failed(
                options_.name, table, path,
                fmt::format("line {} has {} field(s) where the header (line 1) has {}, so "
                            "DuckDB's reader cannot tell the file's columns: it would read "
                            "each line as one value",
                            bad->first, bad->second, fields),
                fmt::format("make every line have the header's {} fields (remove a {} at the "
                            "end of a line; quote a value that holds it), then run again",
                            fields, delim == '\t' ? std::string("tab") : fmt::format("'{}'", delim)));
        }
      } else if (!json_ && !rows.empty() && rows[0][0].value_or("") == "column0" &&
                 skips_delimited_lines(path, skip, rows[0][2].value_or(","))) {
        strict_check(con, path, header_delimiter(path).first);
      } else if (!json_ && !rows.empty() && rows[0][0].value_or("") != "column0" &&
                 !first_line_starts_with(path, rows[0][0].value_or("")) && skip > 0) {
        // A header taken from a later line: the lines before it would be left out, rows
        // (a one-column file whose last line holds a comma) as much as a title. A line
        // with surplus fields after a header of several is the usual cause: read strictly,
        // DuckDB names it. (A first line of one field is more likely a title.)
        if (const auto [delim, fields] = header_delimiter(path); fields > 1)
          strict_check(con, path, delim);
        throw error::read_failed(
            options_.name, table, path,
            fmt::format("DuckDB's reader takes line {} as the header and would leave out "
                        "the {} line(s) before it, whose fields do not match the lines "
                        "after",
                        skip + 1, skip),
            "if those lines are a title, remove them from the file; if they are rows, make "
            "every line have the same fields (quote a value that holds the delimiter)");
      }
    } catch (const duck::failure& e) {
      std::string reason = e.what();
      if (!json_ && reason.find("Error when sniffing file") != std::string::npos) {
        try {
          duck::connection con(db());
          strict_check(con, path, header_delimiter(path).first);
        } catch (const duck::failure& strict) {
          reason = strict.what();
        }
      }
      reason = json_ ? json_reason(path, std::move(reason)) : csv_reason(std::move(reason), path);
      if (auto plain = file_level_reason(path, reason))
        reason = std::move(*plain);
      if (!json_)
        if (auto mixed = mixed_line_endings(path))
          throw error::read_failed(options_.name, table, path, reason,
                                   fmt::format("{} {}", *mixed, fix_file));
      throw error::read_failed(options_.name, table, path, reason, fix_file);
    }
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& row : rows)
      out.emplace_back(row[0].value_or(""), row[1].value_or("VARCHAR"));
    return out;
  }

  /// Whether `text` holds a string that begins as "2024-03-15 10:00 or "2024-03-15T10:00:
  /// a quote, then digits and separators in that shape. One pass, no regex (every JSON
  /// file's head is read).
  static bool holds_iso_stamp(std::string_view text) {
    static constexpr std::string_view shape = "\"dddd-dd-dd dd:dd";
    const auto fits = [&](std::size_t at) {
      for (std::size_t j = 0; j < shape.size(); ++j) {
        const char c = text[at + j];
        if (shape[j] == 'd' ? (c < '0' || c > '9') : c != shape[j] && !(j == 11 && c == 'T'))
          return false;
      }
      return true;
    };
    for (std::size_t at = text.find('"'); at != std::string_view::npos && at + shape.size() <= text.size();
         at = text.find('"', at + 1))
      if (fits(at))
        return true;
    return false;
  }

  /// JSON's inference guesses one timestamp format per file. The timestamp columns it
  /// found (`described`: name, DuckDB type) with a value that does not begin with the year
  /// are text: that format (03-04-2024 10:00:00 PM) reads day and month in an order the
  /// values may not settle. And the text columns whose every value is an ISO-8601
  /// timestamp (2024-03-15 10:00:00 or 2024-03-15T10:00:00, fractions allowed, a UTC
  /// offset or Z too: what JavaScript's toISOString() writes), which the reader's own
  /// inference leaves text (it takes neither T nor an offset, and settles one format per
  /// file), are timestamps: with an offset in some value, TIMESTAMP WITH TIME ZONE (as the
  /// CSV reader types them), else TIMESTAMP. One pass over those columns, read as text,
  /// for a file with a timestamp column or whose first bytes hold a string that begins as
  /// such a timestamp.
  static void year_first_timestamps(duck::connection& con, const std::string& path,
                                    std::vector<std::vector<std::optional<std::string>>>& described) {
    if (std::none_of(described.begin(), described.end(), [](const auto& d) {
          return d[1].value_or("").starts_with("TIMESTAMP");
        }) && (compressed(path) || !holds_iso_stamp(file_head(path))))
      return;
    std::string columns, select;
    std::vector<std::pair<std::size_t, bool>> asked;  // column, and whether a timestamp
    for (std::size_t i = 0; i < described.size(); ++i) {
      const std::string type = described[i][1].value_or("");
      const bool stamp = type.starts_with("TIMESTAMP");
      if (!stamp && type != "VARCHAR")
        continue;
      const std::string name = described[i][0].value_or("");
      const std::string v = quote_ident(name);
      columns += fmt::format("{}{}: 'VARCHAR'", columns.empty() ? "" : ", ", quote_literal(name));
      select += select.empty() ? "" : ", ";
      if (stamp) {
        // Year first (else text), and whether some value has a UTC offset: the reader
        // types whole seconds with a Z (2024-03-15T10:00:00Z) TIMESTAMP, dropping the Z.
        select += fmt::format(
            "CAST(bool_and({0} IS NULL OR regexp_matches({0}, '^\\s*[0-9]{{4}}')) AS VARCHAR), "
            "CAST(bool_or(regexp_matches(trim({0}), '{1}')) AS VARCHAR)",
            v, k_utc_offset);
      } else {
        select += fmt::format(
            "CAST(count({0}) > 0 AND bool_and({0} IS NULL OR (regexp_full_match({0}, "
            "'[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}[ T][0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}([.][0-9]+)?"
            "{1}?') AND TRY_CAST({0} AS TIMESTAMPTZ) IS NOT NULL)) AS VARCHAR), "
            "CAST(bool_or(regexp_matches({0}, '{2}')) AS VARCHAR)",
            v, std::string_view(k_utc_offset).substr(0, std::string_view(k_utc_offset).size() - 1),
            k_utc_offset);
      }
      asked.emplace_back(i, stamp);
    }
    const auto row =
        con.strings(fmt::format("SELECT {} FROM read_json_auto({}, sample_size = -1, records = "
                                "'true', map_inference_threshold = -1{}, columns = {{{}}})",
                                select, quote_literal(path), json_format(path), columns));
    if (row.size() != 1)
      return;
    std::size_t at = 0;  // two answers a column: all timestamps (year first), some offset
    for (const auto& [i, stamp] : asked) {
      if (at >= row[0].size())
        break;
      if (stamp && row[0][at].value_or("true") != "true")
        described[i][1] = "VARCHAR";
      else if (stamp && row[0][at + 1].value_or("false") == "true")
        described[i][1] = "TIMESTAMP WITH TIME ZONE";
      else if (!stamp && row[0][at].value_or("false") == "true")
        described[i][1] = row[0][at + 1].value_or("false") == "true" ? "TIMESTAMP WITH TIME ZONE"
                                                                     : "TIMESTAMP";
      at += 2;
    }
  }

  /// The CSV file read in `dialect` with every `described` column (name, DuckDB type) as
  /// text: what a check of the values as written reads.
  static std::string as_text(const std::string& path, const std::string& dialect,
                             const std::vector<std::vector<std::optional<std::string>>>& described) {
    std::string columns;
    for (const auto& d : described)
      columns += fmt::format("{}{}: 'VARCHAR'", columns.empty() ? "" : ", ",
                             quote_literal(d[0].value_or("")));
    return fmt::format("read_csv({}, {}, columns = {{{}}})", quote_literal(path), dialect, columns);
  }

  /// Whether the file may hold a hexadecimal or binary number (0x1F, 0b101): a 0 followed
  /// by x or b and a digit of that base, not inside a word. One pass over the bytes.
  static bool may_hold_radix_numbers(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::array<char, 1 << 16> buf{};
    char a = 0, b = 0, c = 0;  // the three bytes before the current one
    while (in) {
      in.read(buf.data(), buf.size());
      const auto n = static_cast<std::size_t>(in.gcount());
      for (std::size_t i = 0; i < n; ++i) {
        const char d = buf[i];
        const bool word_before = std::isalnum(static_cast<unsigned char>(a)) || a == '.' || a == '_';
        if (!word_before && b == '0' &&
            (((c == 'x' || c == 'X') && std::isxdigit(static_cast<unsigned char>(d))) ||
             ((c == 'b' || c == 'B') && (d == '0' || d == '1'))))
          return true;
        a = b;
        b = c;
        c = d;
      }
    }
    return false;
  }

  /// DuckDB's CSV sniffer types a column of 0x1F or 0b101 values as an integer, and its
  /// cast reads them as numbers: the text 0x1F would load as 31. Such a column is text,
  /// as a column of zero-padded codes (007) is: the file's text, loaded as written.
  static void radix_text(duck::connection& con, const std::string& path,
                         const std::string& dialect,
                         std::vector<std::vector<std::optional<std::string>>>& described) {
    std::string select;
    std::vector<std::size_t> ints;
    for (std::size_t i = 0; i < described.size(); ++i) {
      const std::string name = described[i][0].value_or("");
      const std::string type = described[i][1].value_or("");
      if (type.find("INT") == std::string::npos)
        continue;
      select += fmt::format("{}CAST(bool_or(regexp_matches(trim({}), '^[+-]?0[xXbB]')) AS VARCHAR)",
                            select.empty() ? "" : ", ", quote_ident(name));
      ints.push_back(i);
    }
    if (ints.empty() || !may_hold_radix_numbers(path))
      return;
    const auto row = con.strings(fmt::format("SELECT {} FROM {}", select,
                                             as_text(path, dialect, described)));
    if (row.size() != 1)
      return;
    for (std::size_t j = 0; j < ints.size(); ++j)
      if (row[0][j].value_or("false") == "true")
        described[ints[j]][1] = "VARCHAR";
  }

  /// DuckDB's CSV sniffer types a column of whole numbers one of which is past a bigint's
  /// range as a double, which would round it (18446744073709551615 as ...616): such a
  /// column is a decimal of its widest value's digits (20 at least, up to 38), as the JSON
  /// reader types it. One pass over the file, read as text, only when it has such a run.
  static void wide_integers(duck::connection& con, const std::string& path,
                            const std::string& dialect,
                            std::vector<std::vector<std::optional<std::string>>>& described) {
    std::string select;
    std::vector<std::size_t> doubles;
    for (std::size_t i = 0; i < described.size(); ++i) {
      if (described[i][1].value_or("") != "DOUBLE")
        continue;
      const std::string v = fmt::format("trim({})", quote_ident(described[i][0].value_or("")));
      select += fmt::format(
          "{}CAST(bool_and({} IS NULL OR regexp_full_match({}, '[-+]?[0-9]+')) AND "
          "bool_or(TRY_CAST({} AS BIGINT) IS NULL) AS VARCHAR), "
          "CAST(max(length(ltrim(regexp_replace({}, '[-+]', ''), '0'))) AS VARCHAR)",
          select.empty() ? "" : ", ", v, v, v, v);
      doubles.push_back(i);
    }
    if (doubles.empty() || !may_hold_long_numbers(path))
      return;
    const auto row = con.strings(fmt::format("SELECT {} FROM {}", select,
                                             as_text(path, dialect, described)));
    if (row.size() != 1)
      return;
    for (std::size_t j = 0; j < doubles.size(); ++j) {
      const int digits = std::stoi(row[0][2 * j + 1].value_or("0"));
      if (row[0][2 * j].value_or("false") == "true" && digits <= 38)
        described[doubles[j]][1] = fmt::format("DECIMAL({},0)", std::max(20, digits));
    }
  }

  /// The text columns of a CSV file (`described`: name, DuckDB type) whose every value is
  /// an ISO timestamp (2024-03-15 10:00:00, with T, fractions, an offset): typed TIMESTAMP,
  /// or TIMESTAMP WITH TIME ZONE when some value has an offset, as DuckDB's sniffer types
  /// them when it has guessed no other format. One pass over the file, read as text.
  static void iso_timestamps(duck::connection& con, const std::string& path,
                             const std::string& dialect,
                             std::vector<std::vector<std::optional<std::string>>>& described) {
    std::string select;
    std::vector<std::size_t> text;
    for (std::size_t i = 0; i < described.size(); ++i) {
      const std::string name = described[i][0].value_or("");
      if (described[i][1].value_or("") != "VARCHAR")
        continue;
      const std::string v = fmt::format("trim({})", quote_ident(name));
      select += fmt::format(
          "{}CAST(count({}) > 0 AND bool_and({} IS NULL OR (regexp_matches({}, "
          "'^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}[ T][0-9]') AND TRY_CAST({} AS TIMESTAMPTZ) IS NOT "
          "NULL)) AS VARCHAR), CAST(bool_or(regexp_matches({}, '{}')) AS VARCHAR)",
          select.empty() ? "" : ", ", v, v, v, v, v, k_utc_offset);
      text.push_back(i);
    }
    if (text.empty())
      return;
    const auto row = con.strings(fmt::format("SELECT {} FROM {}", select,
                                             as_text(path, dialect, described)));
    if (row.size() != 1)
      return;
    for (std::size_t j = 0; j < text.size(); ++j)
      if (row[0][2 * j].value_or("false") == "true")
        described[text[j]][1] = row[0][2 * j + 1].value_or("false") == "true"
                                    ? "TIMESTAMP WITH TIME ZONE"
                                    : "TIMESTAMP";
  }

  /// DuckDB's CSV reader infers a double for numbers with a point or past 64 bits, which
  /// would round one with more digits than a double keeps (12345678901234567.123456789,
  /// 18446744073709551615): a column read as a double holding such a value fails the read,
  /// naming the column and the value, instead of loading it changed (seed 000: inferred
  /// types never become float by themselves).
  void check_long_numbers(duck::connection& con, const std::string& path,
                          const read_request& request) {
    std::vector<std::string> doubles;
    for (const auto& c : request.columns.columns)
      if (c.type.kind == schema::type_kind::float64 || c.type.kind == schema::type_kind::float32)
        doubles.push_back(c.name);
    if (doubles.empty() || !may_hold_long_numbers(path))
      return;
    std::string select, where;
    for (const auto& name : doubles) {
      const std::string v = fmt::format("trim({})", quote_ident(name));
      // More digits than a double keeps, or an exponent that leaves its range.
      const std::string long_value = fmt::format(
          "(length(ltrim(regexp_replace(split_part(lower({0}), 'e', 1), '[^0-9]', '', 'g'), "
          "'0')) > 15 OR regexp_matches({0}, '[eE][+-]?[0-9]{{3,}}'))",
          v);
      select += fmt::format("{}CASE WHEN {} THEN {} END", select.empty() ? "" : ", ", long_value, v);
      where += fmt::format("{}{}", where.empty() ? "" : " OR ", long_value);
    }
    const auto rows = con.strings(fmt::format("SELECT {} FROM {} WHERE {} LIMIT 1000", select,
                                              text_relation(path, *request.table), where));
    for (const auto& row : rows)
      for (std::size_t i = 0; i < row.size() && i < doubles.size(); ++i) {
        if (!row[i])
          continue;
        const std::string& text = *row[i];
        char* end = nullptr;
        const double d = std::strtod(text.c_str(), &end);
        if (end == text.c_str())
          continue;
        // Past a double's range it would load as an infinity; below it, as 0.
        const bool overflow = !std::isfinite(d);
        const bool underflow =
            d == 0 && text.find_first_of("123456789") < text.find_first_of("eE");
        if (overflow || underflow)
          throw error::read_failed(
              options_.name, request.table->name, path,
              fmt::format("column '{}' holds the number {}, {} a double holds: it would load "
                          "as {}",
                          doubles[i], text, overflow ? "past the largest" : "below the smallest",
                          overflow ? (d > 0 ? "inf" : "-inf") : "0"),
              fmt::format("pin the column's type in flotilla.toml ({} "
                          "columns = {{ {} = \"text\" }})",
                          schema::table_header(options_.name, request.table->name),
                          schema::toml_key(doubles[i])));
        const std::string as_double = shortest_double(d);
        if (decimal_of(text) == decimal_of(as_double))
          continue;
        // 15 significant digits or fewer: the double nearest them is the value (4.9e-324,
        // a subnormal, prints as 5e-324 and is the same double).
        std::size_t significant = 0;
        for (const char ch : text.substr(0, text.find_first_of("eE")))
          significant += (ch >= '0' && ch <= '9' && (significant > 0 || ch != '0')) ? 1 : 0;
        if (significant <= 15)
          continue;
        // The pin that holds every value of the column: the narrowest decimal, when all
        // are plain decimal numbers that fit one; text otherwise.
        std::string pin = "\"text\"";
        if (const auto fit = decimal_fit(*request.table, {doubles[i]}); !fit.empty() && fit[0]) {
          const int scale = fit[0]->scale;
          const int digits = std::max(1, fit[0]->integer) + scale;
          if (digits <= 38)
            pin = fmt::format("\"decimal({},{})\" }}, or {{ {} = \"text\"", digits, scale,
                              doubles[i]);
        }
        throw error::read_failed(
            options_.name, request.table->name, path,
            fmt::format("column '{}' holds the number {}, which has more digits than the double "
                        "the column is read as keeps: it would load as {}",
                        doubles[i], text, as_double),
            fmt::format("pin the column's type in flotilla.toml ({} "
                        "columns = {{ {} = {} }})",
                        schema::table_header(options_.name, request.table->name),
                        schema::toml_key(doubles[i]), pin));
      }
  }

  /// A quoted empty value ("") is an empty string, an unquoted one (nothing between the
  /// delimiters) NULL, as PostgreSQL's COPY ... CSV writes them; DuckDB's reader makes both
  /// NULL unless told (allow_quoted_nulls = false), and then a "" in a number or date
  /// column is an error. A file holding "" reads every column as its read type with
  /// quoted empties kept, when every "" is in a text column (checked by a first pass);
  /// nullopt (read as usual: "" as NULL) otherwise.
  std::optional<std::string> keeping_empty_strings(duck::connection& con, const std::string& path,
                                                   const read_request& request) {
    if (!has_quoted_empty(path))
      return std::nullopt;
    std::string types, typed;
    for (const auto& c : request.columns.columns) {
      const std::string t = duckdb_parse_type(c.type);
      if (t.empty())
        return std::nullopt;
      types += fmt::format("{}{}: {}", types.empty() ? "" : ", ", quote_literal(c.name),
                           quote_literal(t));
      if (t != "VARCHAR")  // the columns a "" can fail (named, so the reader parses them)
        typed += fmt::format("{}{}", typed.empty() ? "" : ", ", quote_ident(c.name));
    }
    if (types.empty())
      return std::nullopt;
    std::string relation =
        described_relation(path, *request.table, &request.columns, false,
                           ", allow_quoted_nulls = false")
            .value_or(fmt::format(
                "read_csv({}, sample_size = -1, {}, allow_quoted_nulls = false, types = {{{}}})",
                quote_literal(path), csv_args(path), types));
    try {
      if (!typed.empty())
        con.exec(fmt::format("SELECT count(*) FROM {} WHERE hash({}) IS NOT NULL", relation, typed));
    } catch (const duck::failure&) {
      return std::nullopt;  // a "" where no text goes: read as NULL, as before
    }
    return relation;
  }

  /// Whether a CSV file has a field that is just "" (at a line's start or after a
  /// delimiter, and followed by one or the line's end). One pass over the bytes.
  static bool has_quoted_empty(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    const auto edge = [](char c) {
      return c == '\n' || c == '\r' || c == ',' || c == ';' || c == '\t' || c == '|';
    };
    // The last three bytes seen: `before` `"` `"` then the byte after decides.
    char before = '\n', q1 = '\n', q2 = '\n';  // the file's start acts as a line end
    std::array<char, 1 << 16> buf{};
    while (in) {
      in.read(buf.data(), buf.size());
      const auto n = static_cast<std::size_t>(in.gcount());
      for (std::size_t i = 0; i < n; ++i) {
        const char c = buf[i];
        if (q1 == '"' && q2 == '"' && edge(before) && edge(c))
          return true;
        before = q1;
        q1 = q2;
        q2 = c;
      }
    }
    return q1 == '"' && q2 == '"' && edge(before);  // "" closing the file
  }

  /// Whether every field of the file's first line is a number.
  static bool first_line_numbers_only(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.starts_with("\xEF\xBB\xBF"))
      line.erase(0, 3);
    const char delim = header_delimiter(path).first;
    static const std::regex number(R"(\s*"?[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?"?\s*)");
    std::size_t start = 0;
    while (true) {
      const auto end = line.find(delim, start);
      if (!std::regex_match(line.substr(start, end - start), number))
        return false;
      if (end == std::string::npos)
        return true;
      start = end + 1;
    }
  }

  void strict_check(duck::connection& con, const std::string& path, char delim = ',') {
    const std::size_t n = header_fields(path, delim);
    std::string columns;
    for (std::size_t i = 1; i <= n; ++i)
      columns += fmt::format("{}'c{}': 'VARCHAR'", i > 1 ? ", " : "", i);
    con.exec(fmt::format(
        "SELECT count(*) FROM read_csv({}, auto_detect = false, delim = {}, quote = '\"', "
        "escape = '\"', header = true, columns = {{{}}})",
        quote_literal(path), quote_literal(std::string(1, delim)), columns));
  }

  /// Whether DuckDB's sniffer skips lines at the file's start that hold its delimiter:
  /// rows, not a title, left out because a later line has more fields.
  static bool skips_delimited_lines(const std::string& path, std::size_t skip,
                                    const std::string& delim) {
    std::ifstream in(path, std::ios::binary);
    std::string line;
    for (std::size_t i = 0; i < skip && std::getline(in, line); ++i)
      if (!delim.empty() && line.find(delim[0]) != std::string::npos)
        return true;
    return false;
  }

  /// A value that opens a double quote and never closes it makes DuckDB's sniffer settle
  /// on no quoting at all, and the file would load with the quote kept and the value cut
  /// at the next delimiter. Such a file is read strictly with quoting, so the read fails
  /// naming the line instead.
  void check_quotes(duck::connection& con, const std::string& path) {
    if (!quote_opens_a_value(path))
      return;
    const auto sniffed =
        con.strings(fmt::format("SELECT Delimiter, Quote FROM sniff_csv({}, sample_size = -1, comment = '')",
                    quote_literal(path)));
    const std::string quote = sniffed.size() == 1 ? sniffed[0][1].value_or("") : "\"";
    if (!quote.empty() && quote != "(empty)")  // how sniff_csv spells none
      return;
    const std::string delim = sniffed[0][0].value_or(",");
    try {
      strict_check(con, path, delim.size() == 1 ? delim[0] : ',');
    } catch (const duck::failure& e) {
      throw duck::failure(csv_reason(e.what(), path));
    }
  }

  const duck::database& db() {
    std::lock_guard lock(mutex_);
    if (!db_)
      db_.emplace(duck::database::open_memory());
    return *db_;
  }

  source_options options_;
  bool json_;
  std::mutex mutex_;
  /// Unpacked copies of compressed files (readable()): by file, its version and copy;
  /// by copy, its file. In one temporary directory, removed with the source.
  mutable std::mutex unpack_mutex_;
  mutable std::string unpack_dir_;
  mutable std::size_t unpacked_count_ = 0;
  mutable std::map<std::string, std::pair<std::string, std::string>> unpacked_of_;
  mutable std::map<std::string, std::string> original_of_;
  mutable std::map<std::string, std::string> linked_of_;  ///< a file -> its globless link
  std::optional<duck::database> db_;
  /// known_tables(): an earlier run's tables by name, taken by read_catalog().
  std::map<std::string, source_table> known_;
};

}  // namespace

std::unique_ptr<source> make_file_source(const source_options& options) {
  if (options.path.empty())
    throw error::missing_option(options.name, options.adapter, "path");
  std::error_code ec;
  if (!std::filesystem::exists(options.path, ec))
    throw error::cannot_open(
        options.name, fmt::format("{} path {}", options.adapter, options.path),
        "no such file or directory",
        options.path.find_first_of("*?[") != std::string::npos
            ? fmt::format("path takes a file or a directory, not a pattern: point it at the "
                          "directory, whose every *.{} file is a table (or one source per file)",
                          options.adapter == "json" ? "json, *.ndjson and *.jsonl" : options.adapter)
            : std::string("check path"));
  return std::make_unique<file_source>(options);
}

}  // namespace flotilla::sources
