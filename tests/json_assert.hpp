#pragma once
// Forced into every test translation unit (CMakeLists.txt, flotilla_tests).
//
// Tests read documents with operator[] on const JSON values. For a key that is missing,
// nlohmann leaves that undefined: an assert, compiled out under NDEBUG, then a read
// through the map's end. A test could pass on one machine and crash on another. Here the
// check throws instead, so Catch names the failing expression on every machine (inside
// nlohmann's noexcept functions the throw ends the program, with the same message).
#include <stdexcept>
#include <string>

[[noreturn]] inline void flotilla_json_assert_failed(const char* expression) {
  throw std::logic_error(std::string("nlohmann::json: `") + expression +
                         "` does not hold (a key read through const operator[] is missing?)");
}

#define JSON_ASSERT(x) ((x) ? static_cast<void>(0) : flotilla_json_assert_failed(#x))
