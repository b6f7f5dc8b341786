#pragma once
/// Forward declarations of the sources module's public types.

namespace flotilla::sources {

struct source_error;
struct source_table;
struct catalog;
struct read_request;
struct read_result;
struct source_options;
class source;

}  // namespace flotilla::sources
