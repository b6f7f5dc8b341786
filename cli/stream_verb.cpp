#include "cli/verbs.hpp"

namespace flotilla::cli {

verb stream_verb() { return pending_verb("stream", "change-data capture; runs until stopped"); }

}  // namespace flotilla::cli
