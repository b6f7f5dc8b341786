// The change queue between a table's reader and writer.

#include <catch2/catch.hpp>

#include "engine/change_queue.hpp"

using flotilla::engine::change_queue;
using flotilla::schema::row_batch;
using flotilla::schema::value;

namespace {

row_batch batch_of(std::size_t rows) {
  row_batch b;
  b.width = 1;
  for (std::size_t i = 0; i < rows; ++i)
    b.cells.push_back(value::of_text("a value longer than the short-string buffer"));
  return b;
}

}  // namespace

TEST_CASE("a batch the writer releases comes back to the reader with its memory") {
  change_queue q(2);
  CHECK(q.reuse().cells.empty());  // nothing released yet: a new batch
  REQUIRE(q.push(batch_of(3)));
  auto b = q.pop();
  REQUIRE(b.has_value());
  const auto* cells = b->cells.data();
  const auto* text = b->cells[0].s.data();
  q.release(std::move(*b));
  auto again = q.reuse();
  CHECK(again.cells.data() == cells);
  CHECK(again.cells[0].s.data() == text);
  CHECK(q.reuse().cells.empty());
}

TEST_CASE("the queue keeps at most two released batches, and none once closed") {
  change_queue q(8);
  q.release(batch_of(1));
  q.release(batch_of(2));
  q.release(batch_of(3));
  CHECK(q.reuse().rows() == 2);
  CHECK(q.reuse().rows() == 1);
  CHECK(q.reuse().rows() == 0);
  q.close();
  q.release(batch_of(1));
  CHECK(q.reuse().rows() == 0);
  CHECK_FALSE(q.pop().has_value());
}

TEST_CASE("a cleared value is a null that keeps its string's memory") {
  value v = value::of_text("a value longer than the short-string buffer");
  v.i = 7;
  const auto capacity = v.s.capacity();
  v.clear();
  CHECK(v == value::null());
  CHECK(v.s.capacity() == capacity);
}
