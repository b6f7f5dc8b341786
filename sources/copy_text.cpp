#include "sources/copy_text.hpp"

namespace flotilla::sources {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

}  // namespace

void unescape_copy(std::string_view text, std::string& out) {
  out.clear();
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c != '\\' || i + 1 == text.size()) {
      out.push_back(c);
      continue;
    }
    c = text[++i];
    switch (c) {
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': {
        int v = 0, n = 0;
        while (n < 2 && i + 1 < text.size() && hex_value(text[i + 1]) >= 0) {
          v = v * 16 + hex_value(text[++i]);
          ++n;
        }
        if (n == 0)
          out.push_back('x');
        else
          out.push_back(static_cast<char>(v));
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          int v = c - '0', n = 1;
          while (n < 3 && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '7') {
            v = v * 8 + (text[++i] - '0');
            ++n;
          }
          out.push_back(static_cast<char>(v));
        } else {
          out.push_back(c);
        }
    }
  }
}

std::optional<std::string> decode_bytea_hex(std::string_view text) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2 != 0)
    return std::nullopt;
  std::string out;
  out.reserve((text.size() - 2) / 2);
  for (std::size_t i = 2; i < text.size(); i += 2) {
    const int hi = hex_value(text[i]);
    const int lo = hex_value(text[i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

}  // namespace flotilla::sources
