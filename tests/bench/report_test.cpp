// How the harness words its figures and writes its plot script: a figure never reads as
// meeting a target line it misses, and no path breaks the gnuplot script.
#include <catch2/catch.hpp>

#include "bench/report.hpp"

using namespace flotilla::bench;

TEST_CASE("a ratio just under its target line is printed with the digits that show it") {
  CHECK(figure_near(0.7979, 0.8, 2) == "0.798");
  CHECK(figure_near(0.79999, 0.8, 2) == "0.79999");
  CHECK(figure_near(0.8, 0.8, 2) == "0.80");
  CHECK(figure_near(0.8049, 0.8, 2) == "0.805");
  CHECK(figure_near(0.83, 0.8, 2) == "0.83");
  CHECK(figure_near(0.77, 0.8, 2) == "0.77");
  // "<= 20 KB": 20.04 would read as 20.0, on the line it misses.
  CHECK(figure_near(20.04, 20, 1) == "20.04");
  CHECK(figure_near(9.96, 10, 1) == "9.96");
}

TEST_CASE("a ratio's median, min and max share the digits its target line needs") {
  spread one{0.7979, 0.7979, 0.7979, 1};
  CHECK(ratio_text(one, 0.8) == "0.798x");
  spread three{0.7979, 0.7812, 0.8051, 3};
  CHECK(ratio_text(three, 0.8) == "0.798x [0.781-0.805]");
  CHECK(ratio_text(three) == "0.80x [0.78-0.81]");  // no line to read it against
  spread clear{0.86, 0.83, 0.88, 3};
  CHECK(ratio_text(clear, 0.8) == "0.86x [0.83-0.88]");
}

TEST_CASE("a string in the gnuplot script has each single quote written twice") {
  CHECK(gnuplot_quoted("/tmp/x/ap'os/scaling.svg.tmp") == "'/tmp/x/ap''os/scaling.svg.tmp'");
  CHECK(gnuplot_quoted("a \"b\" c") == "'a \"b\" c'");
  CHECK(gnuplot_quoted("") == "''");
}

TEST_CASE("a count of one takes the singular") {
  CHECK(counted(1, "table") == "1 table");
  CHECK(counted(1000, "table") == "1,000 tables");
  CHECK(counted(1, "catalog read") == "1 catalog read");
  CHECK(counted(0, "row") == "0 rows");
}
