#pragma once
/// Fills a reader's row batches cell by cell. When the read request offers spent batches
/// (read_request::spent_batch), it refills one of those: its cells and their strings keep
/// their memory, so a long read stops allocating. Used by one reader thread.

#include <cstddef>
#include <utility>

#include "schema/rows.hpp"
#include "sources/source.hpp"

namespace flotilla::sources {

class batch_builder {
 public:
  batch_builder(const read_request& request, std::size_t width, std::size_t batch_rows)
      : request_(request), width_(width), batch_rows_(batch_rows) {}

  /// The next cell of the current row, a null to write the value into.
  schema::value& next_cell() {
    if (!started_)
      start();
    if (used_ < batch_.cells.size()) {
      schema::value& cell = batch_.cells[used_++];
      cell.clear();
      return cell;
    }
    ++used_;
    return batch_.cells.emplace_back();
  }

  /// Complete rows so far.
  [[nodiscard]] std::size_t rows() const { return width_ == 0 ? 0 : used_ / width_; }
  [[nodiscard]] bool full() const { return rows() >= batch_rows_; }

  /// The batch so far; the next cell starts a new one.
  [[nodiscard]] schema::row_batch take() {
    batch_.cells.resize(used_);  // a reused batch may have held more rows
    started_ = false;
    used_ = 0;
    return std::move(batch_);
  }

 private:
  void start() {
    batch_ = request_.spent_batch ? request_.spent_batch() : schema::row_batch{};
    batch_.width = width_;
    batch_.copy_text.clear();
    batch_.text_rows = 0;
    batch_.copy_binary = false;
    batch_.cells.reserve(batch_rows_ * width_);
    started_ = true;
  }

  const read_request& request_;
  std::size_t width_;
  std::size_t batch_rows_;
  schema::row_batch batch_;
  std::size_t used_ = 0;  ///< cells of batch_ written
  bool started_ = false;
};

}  // namespace flotilla::sources
