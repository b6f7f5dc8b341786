// The flotilla executable loads DuckDB's library the first time it calls DuckDB, not at
// start-up. libduckdb.so is large: the dynamic loader spends ~20 ms relocating it, which
// every command used to pay (`--version`, a run that copies to PostgreSQL, a run whose
// tables are all pruned) whether or not it touched DuckDB. docs/performance.md, prune.
//
// How: this file defines every DuckDB C API function that Flotilla calls (the list
// below) as a jump through a pointer. Each pointer starts at a stub that loads the
// library (dlopen, once, every pointer resolved with dlsym) and then makes the call it
// stood for. The executable is linked with --as-needed, so libduckdb.so is not one of
// its start-up dependencies (cli/CMakeLists.txt; tests/cli/duckdb_loader_test.cpp checks
// both). A call to a DuckDB function missing from the list fails the link, never a run.
//
// The library: FLOTILLA_DUCKDB_LIBRARY when set, else the one the build used
// (third_party/duckdb/libduckdb.so), else `libduckdb.so` on the loader's search path.
// The test binaries and flotilla-bench link DuckDB directly and do not use this file.

#include <duckdb.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#if !defined(__x86_64__) || !defined(__ELF__)
#error "cli/duckdb_loader.cpp's jumps are x86-64 ELF assembly"
#endif

#ifndef FLOTILLA_DUCKDB_LIBRARY_PATH
#define FLOTILLA_DUCKDB_LIBRARY_PATH "libduckdb.so"
#endif

// Every DuckDB C API function Flotilla calls.
#define FLOTILLA_DUCKDB_FUNCTIONS(X)                                                      \
  X(duckdb_append_data_chunk) X(duckdb_appender_add_column) X(duckdb_appender_close)     \
  X(duckdb_appender_column_count) X(duckdb_appender_column_type)                          \
  X(duckdb_appender_create_ext) X(duckdb_appender_destroy) X(duckdb_appender_error)       \
  X(duckdb_appender_flush) X(duckdb_bind_null) X(duckdb_bind_varchar_length)              \
  X(duckdb_close) X(duckdb_column_count) X(duckdb_column_logical_type) X(duckdb_connect)  \
  X(duckdb_create_config) X(duckdb_create_data_chunk) X(duckdb_create_decimal_type)       \
  X(duckdb_create_instance_cache) X(duckdb_create_logical_type)                           \
  X(duckdb_data_chunk_get_size) X(duckdb_data_chunk_get_vector) X(duckdb_data_chunk_reset) \
  X(duckdb_data_chunk_set_size) X(duckdb_decimal_internal_type) X(duckdb_decimal_scale)   \
  X(duckdb_decimal_width) X(duckdb_destroy_config) X(duckdb_destroy_data_chunk)           \
  X(duckdb_destroy_logical_type) X(duckdb_destroy_pending) X(duckdb_destroy_prepare)      \
  X(duckdb_destroy_result) X(duckdb_disconnect) X(duckdb_execute_pending)                 \
  X(duckdb_execute_prepared) X(duckdb_fetch_chunk) X(duckdb_free)                         \
  X(duckdb_get_or_create_from_cache) X(duckdb_get_type_id) X(duckdb_library_version)      \
  X(duckdb_open_ext)                                                                      \
  X(duckdb_pending_error) X(duckdb_pending_prepared_streaming) X(duckdb_prepare)          \
  X(duckdb_prepare_error) X(duckdb_prepared_statement_column_type) X(duckdb_query)        \
  X(duckdb_result_error) X(duckdb_row_count) X(duckdb_set_config)                         \
  X(duckdb_table_description_create) X(duckdb_table_description_create_ext)               \
  X(duckdb_table_description_destroy) X(duckdb_validity_set_row_invalid)                  \
  X(duckdb_value_int64) X(duckdb_value_is_null) X(duckdb_value_varchar)                   \
  X(duckdb_vector_assign_string_element_len) X(duckdb_vector_ensure_validity_writable)    \
  X(duckdb_vector_get_data) X(duckdb_vector_get_validity) X(duckdb_vector_size)

namespace {

void load_duckdb();

/// The stub a pointer starts at: loads the library, then calls the real function.
template <class Fn>
struct first_call;
template <class R, class... A>
struct first_call<R (*)(A...)> {
  template <R (**Slot)(A...)>
  static R call(A... args) {
    load_duckdb();
    return __atomic_load_n(Slot, __ATOMIC_ACQUIRE)(args...);
  }
};

}  // namespace

// One pointer per function (read by the jumps below), and the function itself: a jump
// through it, so arguments and results pass untouched whatever the signature.
#define FLOTILLA_DUCKDB_SLOT(name)                                                        \
  extern "C" __attribute__((visibility("hidden"))) decltype(&::name)                       \
      flotilla_duckdb_slot_##name;                                                        \
  constinit decltype(&::name) flotilla_duckdb_slot_##name =                               \
      &first_call<decltype(&::name)>::call<&flotilla_duckdb_slot_##name>;                  \
  asm(".text\n.globl " #name "\n.type " #name ", @function\n" #name ":\n"                 \
      "\tjmp *flotilla_duckdb_slot_" #name "(%rip)\n.size " #name ", .-" #name "\n");
FLOTILLA_DUCKDB_FUNCTIONS(FLOTILLA_DUCKDB_SLOT)
#undef FLOTILLA_DUCKDB_SLOT

namespace {

std::string library_path() {
  if (const char* p = std::getenv("FLOTILLA_DUCKDB_LIBRARY"); p != nullptr && *p != '\0')
    return p;
  return FLOTILLA_DUCKDB_LIBRARY_PATH;
}

void* open_library(std::string& tried) {
  const std::string path = library_path();
  tried = path;
  if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))
    return h;
  std::string why = dlerror();
  // The build's copy moved or was removed: the loader's search path may still have one.
  if (std::getenv("FLOTILLA_DUCKDB_LIBRARY") == nullptr && path != "libduckdb.so") {
    if (void* h = dlopen("libduckdb.so", RTLD_NOW | RTLD_LOCAL)) {
      tried = "libduckdb.so";  // what later messages name
      return h;
    }
  }
  throw std::runtime_error(
      "cannot load the DuckDB library " + tried + ": " + why +
      ". DuckDB is needed for DuckDB targets and for duckdb, csv and json sources; run "
      "scripts/setup (it fetches the library), or set FLOTILLA_DUCKDB_LIBRARY to the path of "
      "libduckdb.so");
}

void load_duckdb() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void* h = open_library(tried);
    // Resolve every function first, so a library missing one changes no pointer.
#define FLOTILLA_DUCKDB_RESOLVE(name)                                                      \
  void* name##_ptr = dlsym(h, #name);                                                     \
  if (name##_ptr == nullptr) {                                                            \
    dlclose(h);                                                                           \
    throw std::runtime_error("the DuckDB library " + tried + " has no function " #name    \
                             ": it is not the DuckDB version Flotilla was built with "     \
                             "(1.4); run scripts/setup, or point FLOTILLA_DUCKDB_LIBRARY " \
                             "at a matching libduckdb.so");                               \
  }
    FLOTILLA_DUCKDB_FUNCTIONS(FLOTILLA_DUCKDB_RESOLVE)
#undef FLOTILLA_DUCKDB_RESOLVE
#define FLOTILLA_DUCKDB_STORE(name)                                                        \
  __atomic_store_n(&flotilla_duckdb_slot_##name, reinterpret_cast<decltype(&::name)>(name##_ptr), \
                   __ATOMIC_RELEASE);
    FLOTILLA_DUCKDB_FUNCTIONS(FLOTILLA_DUCKDB_STORE)
#undef FLOTILLA_DUCKDB_STORE
  });
}

}  // namespace
