#pragma once
/// Forward declarations of the config module.

namespace flotilla::config {

struct diagnostic;
struct filter;
struct load_result;
struct project;
struct source_config;
struct table_config;
struct table_policy;
struct target_config;

}  // namespace flotilla::config
