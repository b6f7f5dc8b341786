#pragma once
// Whether a setting's key names a secret, so that its value is never repeated in a
// message (configuration diagnostics, librdkafka's rejections kept in run JSON and events).

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace flotilla::config {

[[nodiscard]] inline bool names_secret(std::string_view key) {
  std::string lower(key);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view part : {"pass", "word" /* "sasl.pasword" too */, "pwd", "secret",
                                "token", "jaas", "ssl.key", "credential"})
    if (lower.find(part) != std::string::npos)
      return true;
  return false;
}

}  // namespace flotilla::config
