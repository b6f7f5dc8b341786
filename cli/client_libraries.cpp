// The flotilla executable loads libpq, libcurl and librdkafka the first time it calls
// one of their functions, not at start-up. With what they pull in (OpenSSL, GnuTLS,
// Kerberos, LDAP, SASL, ...) they are most of the executable's shared libraries: the
// dynamic loader spent 8-15 ms mapping and relocating them in every command, including
// runs that read SQLite files into DuckDB and never touch PostgreSQL, Kafka or Pub/Sub.
// docs/performance.md, prune.
//
// How, as cli/duckdb_loader.cpp does for DuckDB: every function of these libraries that
// Flotilla calls (the lists below) is defined here as a jump through a pointer. Each
// pointer starts at a stub that saves the argument registers, loads its library (dlopen,
// once; every pointer of the library resolved with dlsym), restores them and jumps to
// the real function. The stub passes the arguments on untouched, so variadic functions
// (curl_easy_setopt, rd_kafka_producev) go through it like any other. The executable is
// linked with --as-needed, so the three libraries are not among its start-up
// dependencies (cli/CMakeLists.txt; tests/cli/client_libraries_test.cpp checks it). A
// call to a function missing from the lists fails the link, never a run.
//
// A library that cannot be loaded is an installation problem: the process says which
// one and what to do, and exits with status 2 at that first call. The state store is
// crash-safe, so a rerun after scripts/setup finishes the job. The test binaries and
// flotilla-bench link the libraries directly and do not use this file.

#include <curl/curl.h>
#include <dlfcn.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#if !defined(__x86_64__) || !defined(__ELF__)
#error "cli/client_libraries.cpp's stubs are x86-64 ELF assembly"
#endif

// Every function Flotilla calls, per library.
#define FLOTILLA_PQ_FUNCTIONS(X, L)                                                        \
  X(L, PQclear) X(L, PQconninfoFree) X(L, PQconninfoParse) X(L, PQconnectdb) X(L, PQconnectdbParams) X(L, PQconsumeInput)            \
  X(L, PQerrorMessage) X(L, PQexec) X(L, PQexecParams) X(L, PQexecPrepared) X(L, PQfinish) \
  X(L, PQdb) X(L, PQflush) X(L, PQfreemem) X(L, PQgetCopyData) X(L, PQgetResult)         \
  X(L, PQgetisnull) X(L, PQgetlength) X(L, PQgetvalue) X(L, PQhost) X(L, PQnfields)       \
  X(L, PQntuples) X(L, PQport) X(L, PQprepare) X(L, PQuser)                               \
  X(L, PQputCopyData) X(L, PQputCopyEnd) X(L, PQresultErrorField) X(L, PQresultErrorMessage)  \
  X(L, PQresultStatus) X(L, PQsendQuery) X(L, PQisBusy)                                  \
  X(L, PQsetNoticeProcessor) X(L, PQsocket) X(L, PQstatus) X(L, PQtransactionStatus)       \
  X(L, PQgetCancel) X(L, PQcancel) X(L, PQfreeCancel)

#define FLOTILLA_CURL_FUNCTIONS(X, L)                                                      \
  X(L, curl_easy_cleanup) X(L, curl_easy_escape) X(L, curl_easy_getinfo)                  \
  X(L, curl_easy_init) X(L, curl_easy_perform) X(L, curl_easy_reset)                      \
  X(L, curl_easy_setopt) X(L, curl_easy_strerror) X(L, curl_free) X(L, curl_global_init)  \
  X(L, curl_slist_append) X(L, curl_slist_free_all)

#define FLOTILLA_KAFKA_FUNCTIONS(X, L)                                                     \
  X(L, rd_kafka_conf_destroy) X(L, rd_kafka_conf_get) X(L, rd_kafka_conf_new)             \
  X(L, rd_kafka_conf_set) X(L, rd_kafka_conf_set_dr_msg_cb) X(L, rd_kafka_conf_set_error_cb) \
  X(L, rd_kafka_conf_set_log_cb) X(L, rd_kafka_conf_set_opaque) X(L, rd_kafka_destroy)    \
  X(L, rd_kafka_err2name) X(L, rd_kafka_err2str) X(L, rd_kafka_fatal_error)               \
  X(L, rd_kafka_flush) X(L, rd_kafka_metadata) X(L, rd_kafka_metadata_destroy)            \
  X(L, rd_kafka_new) X(L, rd_kafka_opaque) X(L, rd_kafka_poll) X(L, rd_kafka_producev)    \
  X(L, rd_kafka_purge) X(L, rd_kafka_topic_destroy) X(L, rd_kafka_topic_new)             \
  X(L, rd_kafka_conf_properties_show)

// The loaders the stubs call: C linkage, no arguments, they return only once every
// pointer of their library is set.
extern "C" {
__attribute__((visibility("hidden"), used)) void flotilla_load_pq() noexcept;
__attribute__((visibility("hidden"), used)) void flotilla_load_curl() noexcept;
__attribute__((visibility("hidden"), used)) void flotilla_load_kafka() noexcept;
}

// Per function: its pointer, the function (a jump through the pointer) and the stub the
// pointer starts at. The stub keeps the stack 16-byte aligned for the call: entered
// with it at 8 mod 16, it pushes seven registers (56 bytes) and reserves 128 for
// xmm0-7. %rax carries the count of vector registers of a variadic call.
#define FLOTILLA_CLIENT_SLOT(lib, name)                                                    \
  extern "C" __attribute__((visibility("hidden"))) void flotilla_client_first_##name();    \
  extern "C" __attribute__((visibility("hidden"))) void* flotilla_client_slot_##name;      \
  void* flotilla_client_slot_##name = reinterpret_cast<void*>(&flotilla_client_first_##name); \
  asm(".text\n"                                                                           \
      ".globl " #name "\n.type " #name ", @function\n" #name ":\n"                        \
      "\tjmp *flotilla_client_slot_" #name "(%rip)\n"                                     \
      ".size " #name ", .-" #name "\n"                                                    \
      ".type flotilla_client_first_" #name ", @function\n"                                \
      "flotilla_client_first_" #name ":\n"                                                \
      "\tpush %rdi\n\tpush %rsi\n\tpush %rdx\n\tpush %rcx\n\tpush %r8\n\tpush %r9\n"       \
      "\tpush %rax\n"                                                                     \
      "\tsub $128, %rsp\n"                                                                \
      "\tmovdqu %xmm0, 0(%rsp)\n\tmovdqu %xmm1, 16(%rsp)\n\tmovdqu %xmm2, 32(%rsp)\n"      \
      "\tmovdqu %xmm3, 48(%rsp)\n\tmovdqu %xmm4, 64(%rsp)\n\tmovdqu %xmm5, 80(%rsp)\n"     \
      "\tmovdqu %xmm6, 96(%rsp)\n\tmovdqu %xmm7, 112(%rsp)\n"                             \
      "\tcall flotilla_load_" #lib "\n"                                                   \
      "\tmovdqu 0(%rsp), %xmm0\n\tmovdqu 16(%rsp), %xmm1\n\tmovdqu 32(%rsp), %xmm2\n"      \
      "\tmovdqu 48(%rsp), %xmm3\n\tmovdqu 64(%rsp), %xmm4\n\tmovdqu 80(%rsp), %xmm5\n"     \
      "\tmovdqu 96(%rsp), %xmm6\n\tmovdqu 112(%rsp), %xmm7\n"                             \
      "\tadd $128, %rsp\n"                                                                \
      "\tpop %rax\n\tpop %r9\n\tpop %r8\n\tpop %rcx\n\tpop %rdx\n\tpop %rsi\n\tpop %rdi\n"  \
      "\tjmp *flotilla_client_slot_" #name "(%rip)\n"                                     \
      ".size flotilla_client_first_" #name ", .-flotilla_client_first_" #name "\n");
FLOTILLA_PQ_FUNCTIONS(FLOTILLA_CLIENT_SLOT, pq)
FLOTILLA_CURL_FUNCTIONS(FLOTILLA_CLIENT_SLOT, curl)
FLOTILLA_KAFKA_FUNCTIONS(FLOTILLA_CLIENT_SLOT, kafka)
#undef FLOTILLA_CLIENT_SLOT

namespace {

/// What to do when a library cannot be loaded, per library.
struct library {
  const char* soname;   // the ABI the headers describe
  const char* needed_for;
  const char* package;  // Debian's
};

constexpr library pq_library{"libpq.so.5", "PostgreSQL sources and targets", "libpq5"};
constexpr library curl_library{"libcurl.so.4", "the Pub/Sub event sink", "libcurl4"};
constexpr library kafka_library{"librdkafka.so.1", "the Kafka event sink", "librdkafka1"};

[[noreturn]] void cannot_load(const library& lib, const char* why) {
  std::fprintf(stderr,
               "flotilla: cannot load %s, which %s need: %s. Run scripts/setup (it installs "
               "the Debian package %s), then run the command again: the state is intact.\n",
               lib.soname, lib.needed_for, why, lib.package);
  std::fflush(stderr);
  // Called from a stub, possibly on any thread: nothing else can be unwound safely.
  std::_Exit(2);
}

void* open_library(const library& lib) {
  void* h = dlopen(lib.soname, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr)
    cannot_load(lib, dlerror());
  return h;
}

void* resolve(const library& lib, void* h, const char* name) {
  void* p = dlsym(h, name);
  if (p == nullptr) {
    const std::string why = std::string("it has no function ") + name +
                            " (not the version Flotilla was built with)";
    cannot_load(lib, why.c_str());
  }
  return p;
}

}  // namespace

#define FLOTILLA_CLIENT_RESOLVE(lib, name) void* name##_ptr = resolve(which, h, #name);
#define FLOTILLA_CLIENT_STORE(lib, name)                                                   \
  __atomic_store_n(&flotilla_client_slot_##name, name##_ptr, __ATOMIC_RELEASE);

// Every function of the library resolved first, then every pointer set.
#define FLOTILLA_CLIENT_LOADER(lib, which_library, FUNCTIONS)                              \
  extern "C" void flotilla_load_##lib() noexcept {                                         \
    static std::once_flag once;                                                           \
    std::call_once(once, [] {                                                             \
      const library& which = which_library;                                               \
      void* h = open_library(which);                                                      \
      FUNCTIONS(FLOTILLA_CLIENT_RESOLVE, lib)                                             \
      FUNCTIONS(FLOTILLA_CLIENT_STORE, lib)                                               \
    });                                                                                   \
  }
FLOTILLA_CLIENT_LOADER(pq, pq_library, FLOTILLA_PQ_FUNCTIONS)
FLOTILLA_CLIENT_LOADER(curl, curl_library, FLOTILLA_CURL_FUNCTIONS)
FLOTILLA_CLIENT_LOADER(kafka, kafka_library, FLOTILLA_KAFKA_FUNCTIONS)
