#include "cli/verbs.hpp"

namespace flotilla::cli {

verb retry_verb() { return pending_verb("retry", "re-run the failed tables of the latest run"); }

}  // namespace flotilla::cli
