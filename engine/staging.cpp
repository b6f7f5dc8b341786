#include "engine/staging.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <zlib.h>

namespace flotilla::engine {
namespace {

constexpr char magic[] = "FLTSTG2\n";
constexpr char magic_v1[] = "FLTSTG1\n";  // before the CRC
constexpr std::uint8_t batch_mark = 0xB1;
constexpr std::uint8_t end_mark = 0xE0;

std::string errno_text() { return std::strerror(errno); }

struct file_closer {
  void operator()(std::FILE* f) const {
    if (f)
      std::fclose(f);
  }
};

class reader {
 public:
  explicit reader(const std::filesystem::path& path) : path_(path) {
    file_.reset(std::fopen(path.c_str(), "rb"));
    if (!file_)
      throw staging_error(fmt::format("staged data {} cannot be opened: {}; run the table "
                                      "again with `flotilla run` to extract it anew",
                                      path.string(), errno_text()));
    std::setvbuf(file_.get(), nullptr, _IOFBF, 1 << 20);
    char m[sizeof magic - 1];
    get(m, sizeof m);
    has_crc_ = std::memcmp(m, magic, sizeof m) == 0;
    if (!has_crc_ && std::memcmp(m, magic_v1, sizeof m) != 0)
      corrupt("not a staged-data file");
    crc_ = 0;  // of what follows the magic
  }

  void get(void* out, std::size_t n) {
    if (std::fread(out, 1, n, file_.get()) != n)
      corrupt("it ends early (incomplete or damaged)");
    crc_ = static_cast<std::uint32_t>(::crc32_z(crc_, static_cast<const Bytef*>(out), n));
  }
  /// After the row total: the file's CRC matches what was read (a v1 file has none).
  void check_crc() {
    if (!has_crc_)
      return;
    const std::uint32_t read = crc_;
    std::uint32_t stored = 0;
    if (std::fread(&stored, 1, sizeof stored, file_.get()) != sizeof stored)
      corrupt("it ends early (incomplete or damaged)");
    if (stored != read)
      corrupt("its checksum does not match its contents (the file was damaged or changed "
              "after it was written)");
  }
  template <class T>
  T num() {
    T v{};
    get(&v, sizeof v);
    return v;
  }
  std::string str() {
    auto n = num<std::uint32_t>();
    std::string s(n, '\0');
    if (n)
      get(s.data(), n);
    return s;
  }
  schema::table_schema header() {
    schema::table_schema s;
    auto n = num<std::uint32_t>();
    for (std::uint32_t i = 0; i < n; ++i) {
      schema::column c;
      c.name = str();
      auto type = schema::parse_type(str());
      if (!type)
        corrupt("a column type is unknown");
      c.type = *type;
      const auto flags = num<std::uint8_t>();
      c.nullable = (flags & 1) != 0;
      c.key = (flags & 2) != 0;
      s.columns.push_back(std::move(c));
    }
    return s;
  }
  [[noreturn]] void corrupt(std::string_view why) const {
    throw staging_error(fmt::format("staged data {} cannot be read: {}; run the table again "
                                    "with `flotilla run` to extract it anew",
                                    path_.string(), why));
  }

 private:
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, file_closer> file_;
  std::uint32_t crc_ = 0;
  bool has_crc_ = false;
};

}  // namespace

staged_writer::staged_writer(std::filesystem::path path, const schema::table_schema& columns)
    : path_(std::move(path)), tmp_(path_.string() + ".tmp"), width_(columns.columns.size()) {
  // Another table of the run removes the run's directory once its own staged file is
  // spent and the directory is empty: made again if it went between the two calls.
  for (int attempt = 0; attempt < 8 && !file_; ++attempt) {
    std::error_code ec;
    std::filesystem::create_directories(path_.parent_path(), ec);
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (!file_ && errno != ENOENT)
      break;
  }
  if (!file_)
    throw staging_error(fmt::format("cannot stage data in {}: {}; make the state directory "
                                    "writable",
                                    tmp_.string(), errno_text()));
  put(magic, sizeof magic - 1);
  auto n = static_cast<std::uint32_t>(columns.columns.size());
  put(&n, sizeof n);
  for (const auto& c : columns.columns) {
    auto put_str = [&](const std::string& s) {
      auto len = static_cast<std::uint32_t>(s.size());
      put(&len, sizeof len);
      put(s.data(), s.size());
    };
    put_str(c.name);
    put_str(schema::to_string(c.type));
    std::uint8_t flags = (c.nullable ? 1 : 0) | (c.key ? 2 : 0);
    put(&flags, 1);
  }
}

staged_writer::~staged_writer() {
  if (file_)
    std::fclose(file_);
  if (!finished_) {
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
  }
}

void staged_writer::put(const void* data, std::size_t n) {
  buffer_.append(static_cast<const char*>(data), n);
  if (buffer_.size() >= (1u << 20))
    flush();
}

void staged_writer::flush() {
  if (buffer_.empty())
    return;
  // The magic, the first flush's first bytes, is not counted.
  const std::size_t skip = std::ftell(file_) == 0 ? sizeof magic - 1 : 0;
  crc_ = static_cast<std::uint32_t>(::crc32_z(
      crc_, reinterpret_cast<const Bytef*>(buffer_.data()) + skip, buffer_.size() - skip));
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
    throw staging_error(
        fmt::format("cannot write staged data {}: {}; free disk space", tmp_.string(), errno_text()));
  buffer_.clear();
}

void staged_writer::write(const schema::row_batch& batch) {
  if (batch.width != width_)
    throw staging_error(fmt::format("staged data {}: a batch of {} columns for a table of {}",
                                    path_.string(), batch.width, width_));
  auto rows = static_cast<std::uint64_t>(batch.rows());
  if (rows == 0)
    return;
  put(&batch_mark, 1);
  put(&rows, sizeof rows);
  for (const auto& v : batch.cells) {
    auto tag = static_cast<std::uint8_t>(v.kind);
    put(&tag, 1);
    switch (v.kind) {
      case schema::value::tag::null: break;
      case schema::value::tag::boolean: {
        std::uint8_t b = v.b ? 1 : 0;
        put(&b, 1);
        break;
      }
      case schema::value::tag::integer: put(&v.i, sizeof v.i); break;
      case schema::value::tag::real: put(&v.d, sizeof v.d); break;
      case schema::value::tag::text: {
        auto len = static_cast<std::uint32_t>(v.s.size());
        put(&len, sizeof len);
        put(v.s.data(), v.s.size());
        break;
      }
    }
  }
  rows_ += rows;
}

void staged_writer::finish() {
  put(&end_mark, 1);
  put(&rows_, sizeof rows_);
  flush();
  const std::uint32_t crc = crc_;
  buffer_.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
    throw staging_error(
        fmt::format("cannot write staged data {}: {}; free disk space", tmp_.string(), errno_text()));
  buffer_.clear();
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)
    throw staging_error(
        fmt::format("cannot write staged data {}: {}; free disk space", tmp_.string(), errno_text()));
  std::fclose(file_);
  file_ = nullptr;
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec)
    throw staging_error(fmt::format("cannot finish staged data {}: {}", path_.string(), ec.message()));
  finished_ = true;
}

schema::table_schema staged_columns(const std::filesystem::path& path) {
  reader r(path);
  return r.header();
}

void verify_staged(const std::filesystem::path& path) {
  reader r(path);  // opens it and checks the magic
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  constexpr std::size_t head = sizeof magic - 1;
  if (ec || size < head + sizeof(std::uint32_t))
    r.corrupt("it ends early (incomplete or damaged)");
  // A v1 file has no CRC: its reading checks what it can.
  std::unique_ptr<std::FILE, file_closer> f(std::fopen(path.c_str(), "rb"));
  char m[head];
  if (!f || std::fread(m, 1, head, f.get()) != head || std::memcmp(m, magic, head) != 0)
    return;
  // The CRC of every byte after the magic, stored in the last four.
  std::uint32_t crc = 0;
  std::vector<unsigned char> buffer(1 << 20);
  std::uint64_t left = size - head - sizeof(std::uint32_t);
  while (left > 0) {
    const std::size_t n = std::fread(buffer.data(), 1, std::min<std::uint64_t>(left, buffer.size()), f.get());
    if (n == 0)
      r.corrupt("it ends early (incomplete or damaged)");
    crc = static_cast<std::uint32_t>(::crc32_z(crc, buffer.data(), n));
    left -= n;
  }
  std::uint32_t stored = 0;
  if (std::fread(&stored, 1, sizeof stored, f.get()) != sizeof stored)
    r.corrupt("it ends early (incomplete or damaged)");
  if (stored != crc)
    r.corrupt("its checksum does not match its contents (the file was damaged or changed "
              "after it was written)");
}

std::uint64_t read_staged(const std::filesystem::path& path, std::size_t batch_rows,
                          const std::function<bool(schema::row_batch&&)>& consume) {
  reader r(path);
  const auto columns = r.header();
  const std::size_t width = columns.columns.size();
  if (batch_rows == 0)
    batch_rows = 8192;
  std::uint64_t total = 0;
  schema::row_batch out;
  out.width = width;
  auto emit = [&]() -> bool {
    if (out.cells.empty())
      return true;
    schema::row_batch b;
    b.width = width;
    b.cells.swap(out.cells);
    return consume(std::move(b));
  };
  for (;;) {
    auto mark = r.num<std::uint8_t>();
    if (mark == end_mark) {
      auto expected = r.num<std::uint64_t>();
      if (expected != total)
        r.corrupt(fmt::format("it holds {} rows but says {}", total, expected));
      r.check_crc();
      emit();
      return total;
    }
    if (mark != batch_mark)
      r.corrupt("a batch mark is wrong");
    auto rows = r.num<std::uint64_t>();
    for (std::uint64_t row = 0; row < rows; ++row) {
      for (std::size_t c = 0; c < width; ++c) {
        schema::value v;
        auto tag = r.num<std::uint8_t>();
        switch (tag) {
          case 0: break;
          case 1: v.kind = schema::value::tag::boolean; v.b = r.num<std::uint8_t>() != 0; break;
          case 2: v.kind = schema::value::tag::integer; v.i = r.num<std::int64_t>(); break;
          case 3: v.kind = schema::value::tag::real; v.d = r.num<double>(); break;
          case 4: {
            v.kind = schema::value::tag::text;
            auto len = r.num<std::uint32_t>();
            v.s.resize(len);
            if (len)
              r.get(v.s.data(), len);
            break;
          }
          default: r.corrupt("a value tag is unknown");
        }
        out.cells.push_back(std::move(v));
      }
      ++total;
      if (out.cells.size() >= batch_rows * width && !emit())
        return total;
    }
  }
}

}  // namespace flotilla::engine
