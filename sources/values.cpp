#include "sources/values.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace flotilla::sources {
namespace {

constexpr std::int64_t micros_per_second = 1'000'000;
constexpr std::int64_t micros_per_day = 86'400 * micros_per_second;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

namespace {
// What std::isspace accepts in the "C" locale (the process never sets another), without
// a call per character: every value a source reads goes through trim().
constexpr bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_space(s.back()))
    s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// Reads exactly `n` digits at `pos`.
bool take_digits(std::string_view s, std::size_t& pos, std::size_t n, int& out) {
  if (pos + n > s.size())
    return false;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (!is_digit(c))
      return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  pos += n;
  return true;
}

unsigned days_in_month(std::int64_t y, unsigned m) {
  static constexpr std::array<unsigned, 12> days{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
    return 29;
  return days[m - 1];
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    --q;
  return q;
}

// "HH:MM[:SS[.fraction]]" at pos; advances pos past it.
bool parse_clock(std::string_view s, std::size_t& pos, std::int64_t& micros) {
  int h = 0, m = 0, sec = 0;
  if (!take_digits(s, pos, 2, h) || pos >= s.size() || s[pos] != ':')
    return false;
  ++pos;
  if (!take_digits(s, pos, 2, m))
    return false;
  std::int64_t frac = 0;
  if (pos < s.size() && s[pos] == ':') {
    ++pos;
    if (!take_digits(s, pos, 2, sec))
      return false;
    if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
      ++pos;
      std::size_t start = pos;
      int kept = 0;
      while (pos < s.size() && is_digit(s[pos])) {
        if (kept < 6) {
          frac = frac * 10 + (s[pos] - '0');
          ++kept;
        }
        ++pos;
      }
      if (pos == start)
        return false;
      for (; kept < 6; ++kept)
        frac *= 10;
    }
  }
  const bool midnight_end = h == 24 && m == 0 && sec == 0 && frac == 0;
  if ((h > 23 && !midnight_end) || m > 59 || sec > 59)
    return false;
  micros = ((h * 60 + m) * 60 + sec) * micros_per_second + frac;
  return true;
}

// Increments a string of decimal digits by one unit in the last place; returns false on
// carry out of the most significant digit (the caller prepends '1').
bool increment_digits(std::string& digits) {
  for (std::size_t i = digits.size(); i-- > 0;) {
    if (digits[i] == '9') {
      digits[i] = '0';
    } else {
      ++digits[i];
      return true;
    }
  }
  return false;
}

}  // namespace

// ---- decimals --------------------------------------------------------------------

std::string format_scaled(__int128 unscaled, int scale) {
  const bool negative = unscaled < 0;
  unsigned __int128 mag = negative ? static_cast<unsigned __int128>(-(unscaled + 1)) + 1
                                   : static_cast<unsigned __int128>(unscaled);
  // Digits right to left; 128-bit division is slow, so peel 19-digit chunks off with one
  // division each and do the rest in 64 bits.
  char digits[96];
  char* const end = digits + sizeof digits;
  char* p = end;
  constexpr std::uint64_t chunk = 10'000'000'000'000'000'000ull;
  while (mag > std::numeric_limits<std::uint64_t>::max()) {
    std::uint64_t low = static_cast<std::uint64_t>(mag % chunk);
    mag /= chunk;
    for (int i = 0; i < 19; ++i) {
      *--p = static_cast<char>('0' + low % 10);
      low /= 10;
    }
  }
  std::uint64_t m = static_cast<std::uint64_t>(mag);
  do {
    *--p = static_cast<char>('0' + m % 10);
    m /= 10;
  } while (m != 0);
  while (end - p <= scale)
    *--p = '0';
  const std::size_t n = static_cast<std::size_t>(end - p);
  const std::size_t int_digits = n - static_cast<std::size_t>(scale);
  char out[100];
  std::size_t len = 0;
  if (negative)
    out[len++] = '-';
  std::memcpy(out + len, p, int_digits);
  len += int_digits;
  if (scale > 0) {
    out[len++] = '.';
    std::memcpy(out + len, p + int_digits, static_cast<std::size_t>(scale));
    len += static_cast<std::size_t>(scale);
  }
  return std::string(out, len);
}

namespace {

// normalize_decimal for plain text, "[-+]digits[.digits]" (what std::to_chars and
// PostgreSQL print), written straight into the result. false: not that form.
bool normalize_plain_decimal(std::string_view s, int scale, std::string& out) {
  std::size_t pos = 0;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    ++pos;
  }
  const std::size_t int_start = pos;
  while (pos < s.size() && is_digit(s[pos]))
    ++pos;
  if (pos == int_start)
    return false;
  std::string_view int_digits = s.substr(int_start, pos - int_start);
  std::string_view frac;
  if (pos < s.size() && s[pos] == '.') {
    const std::size_t frac_start = ++pos;
    while (pos < s.size() && is_digit(s[pos]))
      ++pos;
    frac = s.substr(frac_start, pos - frac_start);
  }
  if (pos != s.size())
    return false;
  while (int_digits.size() > 1 && int_digits.front() == '0')
    int_digits.remove_prefix(1);
  const auto want = static_cast<std::size_t>(scale);
  // [0]: room for a carry digit; then the integer digits, the point and the fraction.
  out.assign(1 + int_digits.size() + (want > 0 ? 1 + want : 0), '0');
  char* const first = out.data() + 1;
  std::memcpy(first, int_digits.data(), int_digits.size());
  char* const frac_at = first + int_digits.size() + 1;
  if (want > 0) {
    frac_at[-1] = '.';
    std::memcpy(frac_at, frac.data(), std::min(frac.size(), want));
  }
  bool nonzero = false;
  if (frac.size() > want && frac[want] >= '5') {
    // Half away from zero: add one unit in the last place, carrying left past the point.
    char* p = out.data() + out.size();
    for (;;) {
      --p;
      if (*p == '.')
        continue;
      if (*p != '9') {
        ++*p;
        break;
      }
      *p = '0';
    }
    nonzero = true;
  }
  if (!nonzero)
    for (const char* p = first; p != out.data() + out.size(); ++p)
      if (*p != '0' && *p != '.') {
        nonzero = true;
        break;
      }
  // The carry digit is used when the increment ran into it ("9.99" -> "10.00").
  std::size_t lead = out[0] == '0' ? 1 : 0;
  if (negative && nonzero) {
    if (lead == 1)
      out[0] = '-';
    else
      out.insert(out.begin(), '-');
    lead = 0;
  }
  out.erase(0, lead);
  return true;
}

}  // namespace

std::optional<std::string> normalize_decimal(std::string_view text, int scale) {
  std::string plain;
  if (normalize_plain_decimal(text, scale, plain))
    return plain;
  std::string_view s = trim(text);
  bool negative = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  std::string digits;
  std::int64_t point = -1;  // number of digits before the point
  std::size_t i = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (is_digit(c)) {
      digits.push_back(c);
    } else if (c == '.' && point < 0) {
      point = static_cast<std::int64_t>(digits.size());
    } else {
      break;
    }
  }
  if (digits.empty())
    return std::nullopt;
  if (point < 0)
    point = static_cast<std::int64_t>(digits.size());
  if (i < s.size()) {
    if (s[i] != 'e' && s[i] != 'E')
      return std::nullopt;
    ++i;
    int exp = 0;
    std::string_view e = s.substr(i);
    if (!e.empty() && e.front() == '+')
      e.remove_prefix(1);
    auto [p, ec] = std::from_chars(e.data(), e.data() + e.size(), exp);
    if (ec != std::errc{} || p != e.data() + e.size() || exp > 1000 || exp < -1000)
      return std::nullopt;
    point += exp;
  }
  if (point < 0) {
    digits.insert(0, static_cast<std::size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<std::int64_t>(digits.size()))
    digits.append(static_cast<std::size_t>(point) - digits.size(), '0');
  std::string int_part = digits.substr(0, static_cast<std::size_t>(point));
  std::string frac = digits.substr(static_cast<std::size_t>(point));
  const auto want = static_cast<std::size_t>(scale);
  if (frac.size() <= want) {
    frac.append(want - frac.size(), '0');
  } else {
    const bool round_up = frac[want] >= '5';
    frac.resize(want);
    if (round_up) {
      std::string all = int_part + frac;
      if (!increment_digits(all))
        all.insert(0, 1, '1');
      int_part = all.substr(0, all.size() - want);
      frac = all.substr(all.size() - want);
    }
  }
  std::size_t nz = int_part.find_first_not_of('0');
  int_part = nz == std::string::npos ? "0" : int_part.substr(nz);
  const bool zero = int_part == "0" && frac.find_first_not_of('0') == std::string::npos;
  std::string out;
  out.reserve(int_part.size() + frac.size() + 2);
  if (negative && !zero)
    out.push_back('-');
  out += int_part;
  if (want > 0) {
    out.push_back('.');
    out += frac;
  }
  return out;
}

std::optional<std::string> decimal_from_double(double v, int scale) {
  if (!std::isfinite(v))
    return std::nullopt;
  // Most stored decimals are the double nearest to some n / 10^scale. When that quotient
  // reads back as exactly `v` and v's spacing (ulp) is finer than 10^-scale, it is the
  // only scale-digit decimal that does, so it is also what the shortest round-trip text
  // rounds to: format n directly. n and 10^scale are exact doubles below 2^53 and
  // 10^22, so the one division is correctly rounded, as reading the text would be.
  static constexpr double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                     1e11, 1e12, 1e13, 1e14, 1e15};
  if (scale >= 0 && scale <= 15) {
    const double scaled = v * pow10[scale];
    if (std::fabs(scaled) < 0x1p52) {
      const double n = std::nearbyint(scaled);
      if (n / pow10[scale] == v)
        return format_scaled(static_cast<std::int64_t>(n), scale);
    }
  }
  // The shortest round-trip digits, as scientific text (1e+23, not the double's exact
  // 99999999999999991611392: fixed notation's "shortest" counts the zeros too), written
  // out without the exponent.
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  if (ec != std::errc{})
    return std::nullopt;
  const std::string_view sci(buf, static_cast<std::size_t>(p - buf));
  const auto e = sci.find('e');
  if (e == std::string_view::npos)
    return std::nullopt;
  std::string digits;
  const bool negative = sci.front() == '-';
  for (char c : sci.substr(0, e))
    if (c >= '0' && c <= '9')
      digits.push_back(c);
  int exponent = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                  exponent);
  // digits = d0 d1 d2 ... with the point after d0, moved by the exponent.
  const long point = 1L + exponent;
  std::string plain = negative ? "-" : "";
  if (point <= 0) {
    plain += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (static_cast<std::size_t>(point) >= digits.size()) {
    plain += digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0');
  } else {
    plain += digits.substr(0, static_cast<std::size_t>(point)) + "." +
             digits.substr(static_cast<std::size_t>(point));
  }
  return normalize_decimal(plain, scale);
}

std::string shortest_double(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, static_cast<std::size_t>(p - buf));
}

// ---- dates and times -------------------------------------------------------------

// Howard Hinnant's civil calendar algorithms (public domain); days_from_civil is in
// schema/calendar.hpp.

civil_date civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2), m, d};
}

namespace {

void put2(char*& p, unsigned v) {
  *p++ = static_cast<char>('0' + v / 10);
  *p++ = static_cast<char>('0' + v % 10);
}

// "YYYY-MM-DD" at p; years outside 0..9999 keep their sign and all their digits.
void put_date(char*& p, std::int64_t days) {
  const civil_date c = civil_from_days(days);
  if (c.year >= 0 && c.year <= 9999) {
    const auto y = static_cast<unsigned>(c.year);
    put2(p, y / 100);
    put2(p, y % 100);
  } else {
    auto text = fmt::format("{}{:04d}", c.year < 0 ? "-" : "", c.year < 0 ? -c.year : c.year);
    std::memcpy(p, text.data(), text.size());
    p += text.size();
  }
  *p++ = '-';
  put2(p, c.month);
  *p++ = '-';
  put2(p, c.day);
}

// "HH:MM:SS[.ffffff]" at p, the fraction without trailing zeros.
void put_time(char*& p, std::int64_t micros) {
  const std::int64_t secs = micros / micros_per_second;
  std::int64_t frac = micros % micros_per_second;
  put2(p, static_cast<unsigned>(secs / 3600));
  *p++ = ':';
  put2(p, static_cast<unsigned>((secs / 60) % 60));
  *p++ = ':';
  put2(p, static_cast<unsigned>(secs % 60));
  if (frac != 0) {
    char f[6];
    for (int i = 5; i >= 0; --i) {
      f[i] = static_cast<char>('0' + frac % 10);
      frac /= 10;
    }
    int n = 6;
    while (f[n - 1] == '0')
      --n;
    *p++ = '.';
    std::memcpy(p, f, static_cast<std::size_t>(n));
    p += n;
  }
}

}  // namespace

std::string format_date(std::int64_t days) {
  char buf[64];
  char* p = buf;
  put_date(p, days);
  return std::string(buf, static_cast<std::size_t>(p - buf));
}

std::string format_time(std::int64_t micros) {
  char buf[64];
  char* p = buf;
  put_time(p, micros);
  return std::string(buf, static_cast<std::size_t>(p - buf));
}

std::string format_timestamp(std::int64_t micros, bool utc_offset) {
  const std::int64_t days = floor_div(micros, micros_per_day);
  char buf[96];
  char* p = buf;
  put_date(p, days);
  *p++ = ' ';
  put_time(p, micros - days * micros_per_day);
  if (utc_offset) {
    *p++ = '+';
    *p++ = '0';
    *p++ = '0';
  }
  return std::string(buf, static_cast<std::size_t>(p - buf));
}

std::optional<parsed_timestamp> parse_timestamp(std::string_view text) {
  std::string_view s = trim(text);
  std::size_t pos = 0;
  bool bc_sign = false;
  if (!s.empty() && s.front() == '-') {
    bc_sign = true;
    ++pos;
  }
  std::size_t ystart = pos;
  std::int64_t year = 0;
  while (pos < s.size() && is_digit(s[pos]))
    year = year * 10 + (s[pos++] - '0');
  if (pos - ystart < 4 || pos - ystart > 6 || pos >= s.size() || s[pos] != '-')
    return std::nullopt;
  if (bc_sign)
    year = -year;
  ++pos;
  int month = 0, day = 0;
  if (!take_digits(s, pos, 2, month) || pos >= s.size() || s[pos] != '-')
    return std::nullopt;
  ++pos;
  if (!take_digits(s, pos, 2, day))
    return std::nullopt;
  if (month < 1 || month > 12 || day < 1 ||
      static_cast<unsigned>(day) > days_in_month(year, static_cast<unsigned>(month)))
    return std::nullopt;
  std::int64_t clock = 0;
  if (pos < s.size() && (s[pos] == 'T' || s[pos] == 't' || s[pos] == ' ')) {
    std::size_t p = pos + 1;
    while (p < s.size() && s[p] == ' ')
      ++p;
    if (p < s.size() && is_digit(s[p])) {
      pos = p;
      if (!parse_clock(s, pos, clock))
        return std::nullopt;
    }
  }
  while (pos < s.size() && s[pos] == ' ')
    ++pos;
  parsed_timestamp out;
  std::int64_t offset_seconds = 0;
  if (pos < s.size()) {
    std::string_view rest = s.substr(pos);
    if (rest == "Z" || rest == "z" || iequals(rest, "UTC") || iequals(rest, "GMT")) {
      out.had_offset = true;
      pos = s.size();
    } else if (rest.front() == '+' || rest.front() == '-') {
      const int sign = rest.front() == '-' ? -1 : 1;
      ++pos;
      int oh = 0, om = 0, os = 0;
      if (!take_digits(s, pos, 2, oh))
        return std::nullopt;
      if (pos < s.size()) {
        if (s[pos] == ':')
          ++pos;
        if (!take_digits(s, pos, 2, om))
          return std::nullopt;
        if (pos < s.size()) {
          if (s[pos] == ':')
            ++pos;
          if (!take_digits(s, pos, 2, os))
            return std::nullopt;
        }
      }
      if (oh > 15 || om > 59 || os > 59)
        return std::nullopt;
      offset_seconds = sign * ((oh * 60 + om) * 60 + os);
      out.had_offset = true;
    }
    if (pos != s.size())
      return std::nullopt;
  }
  // Past microseconds since the epoch in 64 bits (years beyond 294,247, or before
  // -290,308): no timestamp any engine holds. Computed without wrapping, which would
  // turn year 294,248 into a date 290,309 BC.
  const std::int64_t days =
      days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  std::int64_t at = 0;
  if (__builtin_mul_overflow(days, micros_per_day, &at) || __builtin_add_overflow(at, clock, &at) ||
      __builtin_sub_overflow(at, offset_seconds * micros_per_second, &at))
    return std::nullopt;
  out.micros = at;
  return out;
}

std::optional<std::int64_t> parse_time(std::string_view text) {
  std::string_view s = trim(text);
  std::size_t pos = 0;
  std::int64_t micros = 0;
  if (!parse_clock(s, pos, micros) || pos != s.size())
    return std::nullopt;
  return micros;
}

std::optional<std::string> normalize_date(std::string_view text) {
  auto ts = parse_timestamp(text);
  // A time of day other than midnight (UTC, after any offset) is no date: dropping it
  // would change the value.
  if (!ts || ts->micros % micros_per_day != 0)
    return std::nullopt;
  return format_date(floor_div(ts->micros, micros_per_day));
}

std::optional<std::string> normalize_time(std::string_view text) {
  auto t = parse_time(text);
  if (!t)
    return std::nullopt;
  return format_time(*t);
}

bool is_canonical_timestamp(std::string_view s) {
  if (s.size() < 19 || s.size() == 20 || s.size() > 26 || s[4] != '-' || s[7] != '-' ||
      s[10] != ' ' || s[13] != ':' || s[16] != ':')
    return false;
  auto field = [&](std::size_t at, std::size_t n, int& out) { return take_digits(s, at, n, out); };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!field(0, 4, y) || !field(5, 2, mo) || !field(8, 2, d) || !field(11, 2, h) ||
      !field(14, 2, mi) || !field(17, 2, sec))
    return false;
  if (mo < 1 || mo > 12 || d < 1 ||
      static_cast<unsigned>(d) > days_in_month(y, static_cast<unsigned>(mo)) || h > 23 ||
      mi > 59 || sec > 59)
    return false;
  if (s.size() == 19)
    return true;
  if (s[19] != '.' || s.back() == '0')
    return false;
  for (std::size_t i = 20; i < s.size(); ++i)
    if (!is_digit(s[i]))
      return false;
  return true;
}

std::optional<std::string> normalize_timestamp(std::string_view text, bool tz) {
  if (is_canonical_timestamp(text)) {
    std::string out;
    out.reserve(text.size() + 3);
    out.append(text);
    if (tz)
      out.append("+00");
    return out;
  }
  auto ts = parse_timestamp(text);
  if (!ts)
    return std::nullopt;
  return format_timestamp(ts->micros, tz);
}

std::optional<std::int64_t> micros_from_unix_seconds(std::int64_t seconds) {
  std::int64_t us = 0;
  if (__builtin_mul_overflow(seconds, micros_per_second, &us))
    return std::nullopt;
  return us;
}

std::optional<std::int64_t> micros_from_julian_day(double jd) {
  // Julian day 2440587.5 is 1970-01-01 00:00:00 UTC; SQLite keeps millisecond precision.
  if (!std::isfinite(jd) || jd < 0 || jd > 5373484.5)
    return std::nullopt;
  const double ms = std::round((jd - 2440587.5) * 86'400'000.0);
  return static_cast<std::int64_t>(ms) * 1000;
}

// ---- other kinds -----------------------------------------------------------------

std::optional<std::string> normalize_uuid(std::string_view text) {
  std::string_view s = trim(text);
  if (s.size() >= 2 && s.front() == '{' && s.back() == '}')
    s = s.substr(1, s.size() - 2);
  std::string hex;
  hex.reserve(32);
  for (char c : s) {
    if (c == '-')
      continue;
    if (!std::isxdigit(static_cast<unsigned char>(c)))
      return std::nullopt;
    hex.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (hex.size() != 32)
    return std::nullopt;
  return hex.substr(0, 8) + '-' + hex.substr(8, 4) + '-' + hex.substr(12, 4) + '-' +
         hex.substr(16, 4) + '-' + hex.substr(20);
}

std::string format_uuid(const unsigned char* b) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      out.push_back('-');
    out.push_back(digits[b[i] >> 4]);
    out.push_back(digits[b[i] & 0xf]);
  }
  return out;
}

std::optional<bool> parse_bool(std::string_view text) {
  std::string_view s = trim(text);
  for (std::string_view t : {"1", "t", "true", "y", "yes", "on"})
    if (iequals(s, t))
      return true;
  for (std::string_view f : {"0", "f", "false", "n", "no", "off"})
    if (iequals(s, f))
      return false;
  return std::nullopt;
}

namespace {

/// "[-]digits" with at most 19 digits, nothing around them: the form nearly every integer
/// a source reads comes in. False for anything else (and beyond int64), which then takes
/// the general parse.
bool plain_int64(std::string_view s, std::int64_t& out) {
  const bool negative = !s.empty() && s[0] == '-';
  const std::size_t first = negative ? 1 : 0;
  if (s.size() == first || s.size() - first > 19)
    return false;
  std::uint64_t v = 0;  // 19 digits stay below 2^64
  for (std::size_t i = first; i < s.size(); ++i) {
    const unsigned d = static_cast<unsigned char>(s[i]) - unsigned{'0'};
    if (d > 9)
      return false;
    v = v * 10 + d;
  }
  constexpr std::uint64_t max = std::numeric_limits<std::int64_t>::max();
  if (v > max + (negative ? 1 : 0))
    return false;
  out = negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  return true;
}

}  // namespace

std::optional<std::int64_t> parse_int64(std::string_view text) {
  if (std::int64_t v = 0; plain_int64(text, v))
    return v;
  std::string_view s = trim(text);
  if (!s.empty() && s.front() == '+')
    s.remove_prefix(1);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty())
    return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view text) {
  std::string_view s = trim(text);
  // A number first: nearly every value is one.
  std::string_view digits = s;
  if (!digits.empty() && digits.front() == '+')
    digits.remove_prefix(1);
  double v = 0;
  if (!digits.empty()) {
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec == std::errc{} && p == digits.data() + digits.size())
      return v;
  }
  if (iequals(s, "infinity") || iequals(s, "+infinity") || iequals(s, "inf"))
    return std::numeric_limits<double>::infinity();
  if (iequals(s, "-infinity") || iequals(s, "-inf"))
    return -std::numeric_limits<double>::infinity();
  if (iequals(s, "nan"))
    return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

std::string cursor_text(const schema::value& v) {
  switch (v.kind) {
    case schema::value::tag::boolean: return v.b ? "true" : "false";
    case schema::value::tag::integer: return std::to_string(v.i);
    case schema::value::tag::real: return shortest_double(v.d);
    case schema::value::tag::text: return v.s;
    case schema::value::tag::null: break;
  }
  return {};
}

bool unbounded_cursor(std::string_view text, const schema::portable_type& type) {
  using k = schema::type_kind;
  switch (type.kind) {
    case k::float32:
    case k::float64:
    case k::decimal:
      return iequals(text, "nan") || iequals(text, "infinity") || iequals(text, "+infinity") ||
             iequals(text, "inf");
    case k::date:
    case k::timestamp_ntz:
    case k::timestamp_tz:
      return iequals(text, "infinity") || iequals(text, "+infinity");
    default:
      return false;
  }
}

bool unbounded_cursor(const schema::value& v, const schema::portable_type& type) {
  if (v.kind == schema::value::tag::real)
    return std::isnan(v.d) || v.d == std::numeric_limits<double>::infinity();
  return v.kind == schema::value::tag::text && unbounded_cursor(std::string_view(v.s), type);
}

}  // namespace flotilla::sources
