#pragma once
/// Row values in flight between a source reader and a sink writer.
///
/// One representation per portable type, chosen so every conversion is exact:
///   bool                       -> boolean
///   smallint, int, bigint      -> integer (int64)
///   float, double              -> real (double)
///   decimal(p,s)               -> text, plain decimal with exactly s fractional digits
///                                 ("-12.50"), never exponent notation
///   varchar, text, json, uuid  -> text (uuid lower-case with dashes)
///   bytes                      -> text holding the raw bytes
///   date                       -> text "YYYY-MM-DD"
///   time                       -> text "HH:MM:SS[.ffffff]"
///   timestamp_ntz              -> text "YYYY-MM-DD HH:MM:SS[.ffffff]"
///   timestamp_tz               -> text "YYYY-MM-DD HH:MM:SS[.ffffff]+00" (UTC instant)
///   NULL (any type)            -> null

#include <cstdint>
#include <string>
#include <vector>

namespace flotilla::schema {

struct value {
  enum class tag : std::uint8_t { null, boolean, integer, real, text };
  tag kind = tag::null;
  bool b = false;
  std::int64_t i = 0;
  double d = 0;
  std::string s;

  static value null() { return {}; }
  static value of_bool(bool v) { value x; x.kind = tag::boolean; x.b = v; return x; }
  static value of_int(std::int64_t v) { value x; x.kind = tag::integer; x.i = v; return x; }
  static value of_real(double v) { value x; x.kind = tag::real; x.d = v; return x; }
  static value of_text(std::string v) { value x; x.kind = tag::text; x.s = std::move(v); return x; }
  [[nodiscard]] bool is_null() const { return kind == tag::null; }
  /// Makes this a null, keeping the string's memory for the next value written into it.
  void clear() {
    kind = tag::null;
    b = false;
    i = 0;
    d = 0;
    s.clear();
  }

  friend bool operator==(const value&, const value&) = default;
};

/// A batch of rows, row-major: cells[row * width + column].
struct row_batch {
  std::size_t width = 0;
  std::vector<value> cells;
  /// Instead of `cells`, from a PostgreSQL source asked for it
  /// (sources::read_request::copy_text): `text_rows` lines of PostgreSQL COPY text, each
  /// ending in '\n', `width` fields each, every field the server's text of its column's
  /// requested type. Only a PostgreSQL sink takes such a batch.
  std::string copy_text;
  std::size_t text_rows = 0;
  /// With `copy_text`: it holds `text_rows` tuples of PostgreSQL's binary COPY format
  /// (no header, no trailer) instead of text lines
  /// (sources::read_request::copy_binary).
  bool copy_binary = false;

  [[nodiscard]] bool is_copy_text() const { return text_rows > 0; }
  [[nodiscard]] std::size_t rows() const {
    return width == 0 ? 0 : is_copy_text() ? text_rows : cells.size() / width;
  }
  [[nodiscard]] const value& at(std::size_t row, std::size_t col) const {
    return cells[row * width + col];
  }
};

}  // namespace flotilla::schema
