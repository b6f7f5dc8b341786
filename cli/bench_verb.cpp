#include "cli/verbs.hpp"

namespace flotilla::cli {

verb bench_verb() { return pending_verb("bench", "run the benchmark harness (build/flotilla-bench)"); }

}  // namespace flotilla::cli
