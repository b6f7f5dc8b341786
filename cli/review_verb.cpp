#include "cli/verbs.hpp"

namespace flotilla::cli {

verb review_verb() { return pending_verb("review", "review list | show | apply | edit | resync | remove (held changes)"); }

}  // namespace flotilla::cli
