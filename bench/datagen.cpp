#include "bench/datagen.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>
#include <sqlite3.h>

#include "bench/pg.hpp"

namespace flotilla::bench {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr std::array<std::string_view, 40> cities = {
    "Springfield", "Riverside", "Franklin",  "Greenville", "Bristol",    "Clinton",
    "Fairview",    "Salem",     "Madison",   "Georgetown", "Arlington",  "Ashland",
    "Burlington",  "Manchester", "Oxford",   "Jackson",    "Milton",     "Newport",
    "Auburn",      "Dayton",    "Lexington", "Milford",    "Winchester", "Hudson",
    "Kingston",    "Dover",     "Marion",    "Oakland",    "Lebanon",    "Columbia",
    "Berlin",      "Lisbon",    "Porto",     "Lyon",       "Graz",       "Utrecht",
    "Aarhus",      "Tampere",   "Gdansk",    "Brno"};
constexpr std::array<std::string_view, 8> domains = {
    "example.com", "mail.test", "shop.example", "corp.test",
    "acme.example", "globex.test", "initech.example", "umbrella.test"};

constexpr std::int64_t epoch_2020_s = 1577836800;

// Howard Hinnant's civil-from-days / days-from-civil.
void civil_from_days(std::int64_t z, int& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = static_cast<int>(static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2));
}

std::int64_t days_from_civil(int y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void check_sqlite(sqlite3* db, int rc, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
    throw std::runtime_error(fmt::format("SQLite {}: {}", what, sqlite3_errmsg(db)));
}

void sqlite_exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "error";
    sqlite3_free(err);
    throw std::runtime_error("SQLite: " + msg + " (in: " + sql.substr(0, 200) + ")");
  }
}

}  // namespace

const std::array<column_def, 16> wide_columns = {{
    {"id", "BIGINT", "bigint", "BIGINT"},
    {"account_id", "INTEGER", "integer", "INTEGER"},
    {"quantity", "INTEGER", "integer", "INTEGER"},
    {"region_id", "INTEGER", "integer", "INTEGER"},
    {"amount", "BIGINT", "bigint", "BIGINT"},
    {"ext_ref", "BIGINT", "bigint", "BIGINT"},
    {"name", "TEXT", "text", "VARCHAR"},
    {"email", "TEXT", "text", "VARCHAR"},
    {"city", "TEXT", "text", "VARCHAR"},
    {"status", "TEXT", "text", "VARCHAR"},
    {"price", "DECIMAL(12,2)", "numeric(12,2)", "DECIMAL(12,2)"},
    {"tax", "DECIMAL(12,2)", "numeric(12,2)", "DECIMAL(12,2)"},
    {"created_at", "TIMESTAMP", "timestamp", "TIMESTAMP"},
    {"updated_at", "TIMESTAMP", "timestamp", "TIMESTAMP"},
    {"active", "BOOLEAN", "boolean", "BOOLEAN"},
    {"score", "DOUBLE", "double precision", "DOUBLE"},
}};

wide_row make_row(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t base = mix(seed * 0x100000001b3ULL + index);
  std::uint64_t h[8];
  for (std::uint64_t k = 0; k < 8; ++k)
    h[k] = mix(base + k);
  wide_row r;
  r.id = static_cast<std::int64_t>(index + 1);
  r.account_id = static_cast<std::int32_t>(1 + h[0] % 50000);
  r.quantity = static_cast<std::int32_t>(1 + (h[0] >> 20) % 20);
  r.region_id = static_cast<std::int32_t>((h[0] >> 40) % 12);
  r.amount = static_cast<std::int64_t>(h[1] % 10'000'000'000ULL) - 1'000'000'000;
  r.ext_ref_null = (h[1] >> 50) % 10 == 0;
  r.ext_ref = static_cast<std::int64_t>(h[2] >> 1);
  r.name = "Customer " + std::to_string(h[3] % 100000);
  r.email = "user" + std::to_string(r.id) + "@" + std::string(domains[(h[3] >> 20) % domains.size()]);
  r.city = cities[h[4] % cities.size()];
  r.city_null = (h[4] >> 8) % 20 == 0;
  const auto s = (h[4] >> 16) % 100;
  r.status = s < 10 ? "new" : s < 40 ? "paid" : s < 70 ? "shipped" : s < 92 ? "delivered"
           : s < 97 ? "returned" : "cancelled";
  r.price_cents = static_cast<std::int64_t>(h[5] % 100'000'000ULL);
  r.tax_null = (h[5] >> 40) % 10 == 0;
  r.tax_cents = r.price_cents * 19 / 100;
  r.created_us = (epoch_2020_s + static_cast<std::int64_t>(h[6] % (5ULL * 365 * 86400))) * 1'000'000;
  r.updated_us = r.created_us + static_cast<std::int64_t>((h[6] >> 32) % (90ULL * 86400 * 1'000'000));
  r.active = (h[7] >> 60) % 10 < 7;
  r.score = static_cast<double>(h[7] >> 11) * 0x1.0p-53 * 1000.0;
  return r;
}

std::string column_list() {
  std::string out;
  for (const auto& c : wide_columns) {
    if (!out.empty())
      out += ", ";
    out += c.name;
  }
  return out;
}

std::string create_table_sql(engine_kind e, const std::string& qualified, bool with_key) {
  std::string out = "CREATE TABLE " + qualified + " (";
  bool first = true;
  for (const auto& c : wide_columns) {
    if (!first)
      out += ", ";
    first = false;
    out += c.name;
    out += ' ';
    out += e == engine_kind::sqlite ? c.sqlite : e == engine_kind::postgres ? c.postgres : c.duckdb;
    if (c.name == "id")
      out += with_key ? " PRIMARY KEY" : " NOT NULL";
    else if (c.name == "account_id" || c.name == "name" || c.name == "created_at")
      out += " NOT NULL";
  }
  return out + ")";
}

std::string decimal_text(std::int64_t cents) {
  const bool neg = cents < 0;
  const std::uint64_t a = neg ? static_cast<std::uint64_t>(-cents) : static_cast<std::uint64_t>(cents);
  return fmt::format("{}{}.{:02}", neg ? "-" : "", a / 100, a % 100);
}

std::string timestamp_text(std::int64_t us) {
  std::int64_t secs = us / 1'000'000;
  std::int64_t frac = us % 1'000'000;
  if (frac < 0) {
    frac += 1'000'000;
    --secs;
  }
  std::int64_t days = secs / 86400;
  std::int64_t sod = secs % 86400;
  if (sod < 0) {
    sod += 86400;
    --days;
  }
  int y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  std::string out = fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", y, m, d, sod / 3600,
                                (sod / 60) % 60, sod % 60);
  if (frac != 0) {
    std::string f = fmt::format("{:06}", frac);
    while (f.back() == '0')
      f.pop_back();
    out += '.';
    out += f;
  }
  return out;
}

bool parse_timestamp_us(std::string_view t, std::int64_t& us) {
  auto num = [&](std::size_t at, std::size_t len, int& v) {
    if (at + len > t.size())
      return false;
    auto r = std::from_chars(t.data() + at, t.data() + at + len, v);
    return r.ec == std::errc() && r.ptr == t.data() + at + len;
  };
  int y, mo, d, h, mi, s;
  if (!num(0, 4, y) || !num(5, 2, mo) || !num(8, 2, d) || !num(11, 2, h) || !num(14, 2, mi) ||
      !num(17, 2, s))
    return false;
  std::int64_t frac = 0;
  if (t.size() > 20 && t[19] == '.') {
    std::size_t digits = 0;
    for (std::size_t i = 20; i < t.size() && digits < 6; ++i, ++digits) {
      if (t[i] < '0' || t[i] > '9')
        return false;
      frac = frac * 10 + (t[i] - '0');
    }
    for (; digits < 6; ++digits)
      frac *= 10;
  }
  us = (days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
        h * 3600 + mi * 60 + s) * 1'000'000 + frac;
  return true;
}

std::string double_text(double d) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

void append_copy_line(std::string& out, const wide_row& r) {
  fmt::format_to(std::back_inserter(out), "{}\t{}\t{}\t{}\t{}\t", r.id, r.account_id, r.quantity,
                 r.region_id, r.amount);
  if (r.ext_ref_null)
    out += "\\N";
  else
    fmt::format_to(std::back_inserter(out), "{}", r.ext_ref);
  out += '\t';
  out += r.name;
  out += '\t';
  out += r.email;
  out += '\t';
  if (r.city_null)
    out += "\\N";
  else
    out += r.city;
  out += '\t';
  out += r.status;
  out += '\t';
  out += decimal_text(r.price_cents);
  out += '\t';
  out += r.tax_null ? std::string("\\N") : decimal_text(r.tax_cents);
  out += '\t';
  out += timestamp_text(r.created_us);
  out += '\t';
  out += timestamp_text(r.updated_us);
  out += '\t';
  out += r.active ? 't' : 'f';
  out += '\t';
  out += double_text(r.score);
  out += '\n';
}

std::uint64_t fleet_client::rows() const {
  std::uint64_t n = 0;
  for (const auto& t : tables)
    n += t.rows;
  return n;
}

std::uint64_t fleet_layout::rows() const {
  std::uint64_t n = 0;
  for (const auto& c : clients)
    n += c.rows();
  return n;
}

std::size_t fleet_layout::tables() const {
  std::size_t n = 0;
  for (const auto& c : clients)
    n += c.tables.size();
  return n;
}

std::vector<std::uint64_t> apportion(std::uint64_t total, const std::vector<double>& weights) {
  const std::size_t n = weights.size();
  std::vector<std::uint64_t> out(n, 0);
  if (n == 0)
    return out;
  std::uint64_t floor_each = total >= n ? 1 : 0;  // at least one row each while possible
  std::uint64_t left = total - floor_each * n;
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<std::pair<double, std::size_t>> rest;
  std::uint64_t given = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double exact = static_cast<double>(left) * weights[i] / sum;
    const auto whole = static_cast<std::uint64_t>(exact);
    out[i] = floor_each + whole;
    given += whole;
    rest.emplace_back(exact - static_cast<double>(whole), i);
  }
  std::sort(rest.begin(), rest.end(), [](auto a, auto b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (std::size_t k = 0; given < left; ++k, ++given)
    ++out[rest[k % n].second];
  if (total < n)  // fewer rows than tables: the first ones get one each
    for (std::size_t i = 0; i < n; ++i)
      out[i] = i < total ? 1 : 0;
  return out;
}

fleet_layout make_fleet(std::size_t clients, std::size_t tables_per_client, std::uint64_t total_rows,
                        double skew, std::uint64_t seed) {
  std::vector<double> cw(clients), tw(tables_per_client);
  for (std::size_t i = 0; i < clients; ++i)
    cw[i] = std::pow(static_cast<double>(i + 1), -skew);
  for (std::size_t i = 0; i < tables_per_client; ++i)
    tw[i] = std::pow(static_cast<double>(i + 1), -skew);
  // Apportioned over every table of the fleet at once (weight: its client's times its
  // own), so each table gets at least one row when the total allows: a client's share
  // apportioned again over its tables left a small client's tail empty.
  std::vector<double> weights;
  weights.reserve(clients * tables_per_client);
  for (std::size_t c = 0; c < clients; ++c)
    for (std::size_t t = 0; t < tables_per_client; ++t)
      weights.push_back(cw[c] * tw[t]);
  const auto per_table = apportion(total_rows, weights);
  fleet_layout f;
  for (std::size_t c = 0; c < clients; ++c) {
    fleet_client fc;
    fc.name = fmt::format("c{:04}", c);
    for (std::size_t t = 0; t < tables_per_client; ++t)
      fc.tables.push_back({fmt::format("t{:05}", t), per_table[c * tables_per_client + t],
                           mix(seed * 1'000'003 + c * 100'003 + t)});
    f.clients.push_back(std::move(fc));
  }
  return f;
}

void write_sqlite_table(sqlite3* db, const std::string& name, std::uint64_t rows,
                        std::uint64_t seed) {
  sqlite_exec(db, create_table_sql(engine_kind::sqlite, "\"" + name + "\""));
  std::string sql = "INSERT INTO \"" + name + "\" VALUES (?";
  for (std::size_t i = 1; i < wide_columns.size(); ++i)
    sql += ",?";
  sql += ")";
  sqlite3_stmt* st = nullptr;
  check_sqlite(db, sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), "prepare");
  for (std::uint64_t i = 0; i < rows; ++i) {
    const auto r = make_row(seed, i);
    int c = 1;
    sqlite3_bind_int64(st, c++, r.id);
    sqlite3_bind_int64(st, c++, r.account_id);
    sqlite3_bind_int64(st, c++, r.quantity);
    sqlite3_bind_int64(st, c++, r.region_id);
    sqlite3_bind_int64(st, c++, r.amount);
    r.ext_ref_null ? sqlite3_bind_null(st, c++) : sqlite3_bind_int64(st, c++, r.ext_ref);
    sqlite3_bind_text(st, c++, r.name.data(), static_cast<int>(r.name.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(st, c++, r.email.data(), static_cast<int>(r.email.size()), SQLITE_TRANSIENT);
    r.city_null ? sqlite3_bind_null(st, c++)
                : sqlite3_bind_text(st, c++, r.city.data(), static_cast<int>(r.city.size()), SQLITE_STATIC);
    sqlite3_bind_text(st, c++, r.status.data(), static_cast<int>(r.status.size()), SQLITE_STATIC);
    const auto price = decimal_text(r.price_cents);
    sqlite3_bind_text(st, c++, price.c_str(), -1, SQLITE_TRANSIENT);
    if (r.tax_null) {
      sqlite3_bind_null(st, c++);
    } else {
      const auto tax = decimal_text(r.tax_cents);
      sqlite3_bind_text(st, c++, tax.c_str(), -1, SQLITE_TRANSIENT);
    }
    const auto created = timestamp_text(r.created_us);
    const auto updated = timestamp_text(r.updated_us);
    sqlite3_bind_text(st, c++, created.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, c++, updated.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, c++, r.active ? 1 : 0);
    sqlite3_bind_double(st, c++, r.score);
    if (sqlite3_step(st) != SQLITE_DONE) {
      std::string msg = sqlite3_errmsg(db);
      sqlite3_finalize(st);
      throw std::runtime_error("SQLite insert: " + msg);
    }
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
}

void write_sqlite_client(const std::string& path, const fleet_client& client) {
  std::remove(path.c_str());
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw std::runtime_error("cannot create " + path + ": " + msg);
  }
  try {
    sqlite_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA synchronous=OFF; BEGIN");
    for (const auto& t : client.tables)
      write_sqlite_table(db, t.name, t.rows, t.seed);
    sqlite_exec(db, "COMMIT");
  } catch (...) {
    sqlite3_close(db);
    throw;
  }
  sqlite3_close(db);
}

void write_pg_table(pg_connection& pg, const std::string& schema, const std::string& name,
                    std::uint64_t rows, std::uint64_t seed) {
  const std::string q = "\"" + schema + "\".\"" + name + "\"";
  pg.exec(create_table_sql(engine_kind::postgres, q));
  std::vector<std::string> chunks(1);
  for (std::uint64_t i = 0; i < rows; ++i) {
    if (chunks.back().size() > (1 << 20))
      chunks.emplace_back();
    append_copy_line(chunks.back(), make_row(seed, i));
  }
  if (rows > 0)
    pg.copy_in("COPY " + q + " FROM STDIN", chunks);
}

}  // namespace flotilla::bench
