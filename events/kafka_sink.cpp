#include "events/kafka_sink.hpp"

#include "config/errc.hpp"
#include "config/secret_key.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <optional>
#include <mutex>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include "events/event.hpp"

namespace flotilla::events {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds default_message_timeout{30000};

enum class state : std::uint8_t { pending, delivered, failed };

/// librdkafka's transient, local failures: the broker was never reached (or did not
/// answer) in time. Everything else is an answer from a broker, or a fatal error.
bool unreachable(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION: return true;
    default: return false;
  }
}

bool purged(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT;
}

bool setting_is(const std::map<std::string, std::string>& s, std::string_view key) {
  return s.contains(std::string(key));
}

// ---- the message headers of a JSON line, without decoding it ------------------------
//
// An outbox entry already in the sink's format goes out as it is; only the headers
// (event type, run id, timestamp) are read from it. For a JSON line that takes a single
// pass that also checks the whole line is well-formed JSON (UTF-8 included), as the full
// decode would: anything this scanner does not accept plainly (escapes in the header
// fields, a non-integer timestamp, deep nesting, a malformed line) takes the full decode.

struct json_headers {
  std::string_view type, run_id;
  std::int64_t timestamp_us = 0;
};

class json_scanner {
 public:
  explicit json_scanner(std::string_view s) : s_(s) {}

  /// The headers of a well-formed top-level JSON object; nullopt: take the full decode.
  std::optional<json_headers> headers() {
    json_headers h;
    ws();
    if (!eat('{'))
      return std::nullopt;
    ws();
    if (!eat('}')) {
      for (;;) {
        ws();
        std::string_view key;
        bool plain = false;
        if (!string(key, plain))
          return std::nullopt;
        ws();
        if (!eat(':'))
          return std::nullopt;
        ws();
        const bool is_type = key == "type", is_run = key == "run_id", is_ts = key == "timestamp_us";
        if ((is_type || is_run) && peek() == '"') {
          std::string_view v;
          if (!string(v, plain) || !plain)
            return std::nullopt;
          (is_type ? h.type : h.run_id) = v;
        } else if (is_ts && peek() != 'n') {
          if (!integer(h.timestamp_us))
            return std::nullopt;
        } else if (is_type || is_run || is_ts) {
          // null leaves the field empty, as the decode does; other types it refuses
          if (!literal("null"))
            return std::nullopt;
          if (is_type)
            h.type = {};
          else if (is_run)
            h.run_id = {};
          else
            h.timestamp_us = 0;
        } else if (!value(0)) {
          return std::nullopt;
        }
        ws();
        if (eat('}'))
          break;
        if (!eat(','))
          return std::nullopt;
      }
    }
    ws();
    if (at_ != s_.size())
      return std::nullopt;
    return h;
  }

 private:
  char peek() const { return at_ < s_.size() ? s_[at_] : '\0'; }
  bool eat(char c) {
    if (peek() != c)
      return false;
    ++at_;
    return true;
  }
  void ws() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r'))
      ++at_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(at_, word.size()) != word)
      return false;
    at_ += word.size();
    return true;
  }
  bool digits() {
    const std::size_t from = at_;
    while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9')
      ++at_;
    return at_ > from;
  }
  bool number() {
    eat('-');
    if (!eat('0') && !digits())
      return false;
    if (eat('.') && !digits())
      return false;
    if (peek() == 'e' || peek() == 'E') {
      ++at_;
      if (!eat('+'))
        eat('-');
      if (!digits())
        return false;
    }
    return true;
  }
  bool integer(std::int64_t& out) {
    const std::size_t from = at_;
    if (!number())
      return false;
    const std::string_view text = s_.substr(from, at_ - from);
    if (text.find_first_of(".eE") != std::string_view::npos)
      return false;  // a fraction or exponent: let the full decode judge it
    const auto r = std::from_chars(text.data(), text.data() + text.size(), out);
    return r.ec == std::errc() && r.ptr == text.data() + text.size();
  }
  /// A JSON string; `plain`: no escapes, so `out` is its exact value.
  bool string(std::string_view& out, bool& plain) {
    if (!eat('"'))
      return false;
    const std::size_t from = at_;
    plain = true;
    while (at_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[at_]);
      if (c == '"') {
        out = s_.substr(from, at_ - from);
        ++at_;
        return true;
      }
      if (c < 0x20)
        return false;
      if (c == '\\') {
        plain = false;
        ++at_;
        const char e = peek();
        if (e == 'u') {
          for (int i = 1; i <= 4; ++i)
            if (at_ + i >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[at_ + i])))
              return false;
          at_ += 5;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                   e == 'r' || e == 't') {
          ++at_;
        } else {
          return false;
        }
        continue;
      }
      if (c < 0x80) {
        ++at_;
        continue;
      }
      if (!utf8())
        return false;
    }
    return false;
  }
  /// One multi-byte UTF-8 sequence (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
  bool utf8() {
    const auto b = [&](std::size_t i) {
      return at_ + i < s_.size() ? static_cast<unsigned char>(s_[at_ + i]) : 0u;
    };
    const unsigned c = b(0);
    std::size_t n = 0;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0)
        lo = 0xa0;
      else if (c == 0xed)
        hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0)
        lo = 0x90;
      else if (c == 0xf4)
        hi = 0x8f;
    } else {
      return false;
    }
    if (b(1) < lo || b(1) > hi)
      return false;
    for (std::size_t i = 2; i <= n; ++i)
      if (b(i) < 0x80 || b(i) > 0xbf)
        return false;
    at_ += n + 1;
    return true;
  }
  bool value(int depth) {
    if (depth > 32)
      return false;
    switch (peek()) {
      case '"': {
        std::string_view v;
        bool plain = false;
        return string(v, plain);
      }
      case '{': {
        ++at_;
        ws();
        if (eat('}'))
          return true;
        for (;;) {
          ws();
          std::string_view k;
          bool plain = false;
          if (!string(k, plain))
            return false;
          ws();
          if (!eat(':'))
            return false;
          ws();
          if (!value(depth + 1))
            return false;
          ws();
          if (eat('}'))
            return true;
          if (!eat(','))
            return false;
        }
      }
      case '[': {
        ++at_;
        ws();
        if (eat(']'))
          return true;
        for (;;) {
          ws();
          if (!value(depth + 1))
            return false;
          ws();
          if (eat(']'))
            return true;
          if (!eat(','))
            return false;
        }
      }
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  std::string_view s_;
  std::size_t at_ = 0;
};

/// One outbox entry as it goes to Kafka: the value and its headers.
struct message {
  std::string_view value;
  std::string_view content_type = "application/octet-stream";
  std::string_view type, run_id;
  std::int64_t timestamp_ms = 0;
  std::string encoded;  ///< holds the value (and the header strings) when re-encoded
  std::string type_buf, run_id_buf;
};

/// Builds the message of `entry` for a sink writing `want_json` (else protobuf). An entry
/// already in that form goes out as it is; otherwise it is decoded and encoded once.
void build_message(const storage::pb::OutboxEntry& entry, bool want_json, message& m) {
  const std::string& payload = entry.payload();
  const bool is_json = entry.format() == storage::pb::PAYLOAD_FORMAT_JSON;
  if (const std::string* ready = ready_payload(entry, want_json)) {
    // Written from the event with its headers (outbox_entry): nothing to read back.
    const auto& h = entry.headers();
    m.value = *ready;
    m.content_type = want_json ? "application/json" : "application/x-protobuf";
    m.type = h.type();
    m.run_id = h.run_id();
    m.timestamp_ms = h.timestamp_us() / 1000;
    return;
  }
  if (want_json && is_json) {
    if (auto h = json_scanner(payload).headers()) {
      m.value = payload;
      m.content_type = "application/json";
      m.type = h->type;
      m.run_id = h->run_id;
      m.timestamp_ms = h->timestamp_us / 1000;
      return;
    }
  }
  std::expected<pb::Event, std::string> event =
      is_json ? from_json(payload) : from_protobuf(payload);
  if (!event) {
    m.value = payload;  // unreadable here: pass it on untouched
    m.content_type = "application/octet-stream";
    m.type = m.run_id = {};
    m.timestamp_ms = 0;
    return;
  }
  if (!want_json && !is_json) {
    m.value = payload;  // already the serialized Event
  } else {
    m.encoded = want_json ? to_json(*event) : to_protobuf(*event);
    m.value = m.encoded;
  }
  m.content_type = want_json ? "application/json" : "application/x-protobuf";
  m.timestamp_ms = event->timestamp_us() / 1000;
  m.type_buf = event->type();
  m.run_id_buf = event->run_id();
  m.type = m.type_buf;
  m.run_id = m.run_id_buf;
}

}  // namespace

struct kafka_sink::impl {
  config::kafka_options options;
  rd_kafka_t* rk = nullptr;
  milliseconds timeout = default_message_timeout;

  // Delivery reports of the current deliver() call. Reports are served by
  // rd_kafka_poll/flush on the calling thread; the generation tells a late report of an
  // earlier call (purged messages) from one of this call.
  std::uint32_t generation = 0;
  std::vector<state> states;
  rd_kafka_resp_err_t first_failure = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string first_failure_text;
  std::string first_failure_event;  ///< "key (N bytes, sequence S of run R)", when known

  // Connection problems librdkafka reported (error callback and log lines from its own
  // threads): the reason given when nothing was acknowledged.
  std::mutex reasons_mu;
  std::vector<std::string> reasons;

  void note_reason(std::string text) {
    // librdkafka repeats itself: "[thrd:host/bootstrap]: " prefixes on log lines and
    // ", 3 identical error(s) suppressed" suffixes say nothing new.
    if (text.starts_with("[thrd:"))
      if (auto end = text.find("]: "); end != std::string::npos)
        text.erase(0, end + 3);
    static const std::regex suppressed(", [0-9]+ identical error\\(s\\) suppressed");
    text = std::regex_replace(text, suppressed, "");
    std::lock_guard lock(reasons_mu);
    if (std::find(reasons.begin(), reasons.end(), text) != reasons.end())
      return;
    if (reasons.size() >= 4)
      reasons.erase(reasons.begin());
    reasons.push_back(std::move(text));
  }

  std::string reason_text() {
    std::lock_guard lock(reasons_mu);
    std::string out;
    for (const auto& r : reasons)
      out += (out.empty() ? "" : "; ") + r;
    return out;
  }

  std::string where() const {
    return fmt::format("brokers {}, topic {}", options.brokers, options.topic);
  }

  ~impl() {
    if (rk != nullptr) {
      rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      rd_kafka_flush(rk, 100);
      rd_kafka_destroy(rk);
    }
  }
};

namespace {

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* p = static_cast<kafka_sink::impl*>(opaque);
  const auto tag = reinterpret_cast<std::uintptr_t>(m->_private);
  const auto generation = static_cast<std::uint32_t>(tag >> 32);
  const auto index = static_cast<std::size_t>(tag & 0xffffffffu);
  if (generation != p->generation || index >= p->states.size())
    return;  // a late report of an earlier deliver()
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    p->states[index] = state::delivered;
    return;
  }
  p->states[index] = state::failed;
  // Purges follow a timeout: the timeout (or the broker's own answer) is the reason.
  if (purged(m->err) && p->first_failure != RD_KAFKA_RESP_ERR_NO_ERROR)
    return;
  if (p->first_failure == RD_KAFKA_RESP_ERR_NO_ERROR || purged(p->first_failure) ||
      (unreachable(p->first_failure) && !unreachable(m->err))) {
    p->first_failure = m->err;
    p->first_failure_text = rd_kafka_err2str(m->err);
    p->first_failure_event =
        fmt::format("'{}' ({} bytes)",
                    m->key ? std::string_view(static_cast<const char*>(m->key), m->key_len)
                           : std::string_view(),
                    m->len);
  }
}

void on_error(rd_kafka_t*, int err, const char* reason, void* opaque) {
  auto* p = static_cast<kafka_sink::impl*>(opaque);
  if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
    return;  // says less than the connection error that preceded it
  p->note_reason(reason);
}

void on_log(const rd_kafka_t* rk, int level, const char*, const char* line) {
  // Keep librdkafka's own lines off the console; warnings and worse become reasons.
  if (level > 4)
    return;
  if (auto* p = static_cast<kafka_sink::impl*>(rd_kafka_opaque(rk)))
    p->note_reason(line);
}

}  // namespace

kafka_sink::kafka_sink(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
kafka_sink::~kafka_sink() = default;

namespace {

/// Every property librdkafka knows, aliases included (the first column of the table it
/// prints of them): the candidates for the nearest name to a misspelt one.
std::vector<std::string_view> known_properties() {
  static const std::vector<std::string> known = [] {
    std::vector<std::string> out;
    char* table = nullptr;
    std::size_t table_size = 0;
    FILE* f = open_memstream(&table, &table_size);
    if (f == nullptr)
      return out;
    rd_kafka_conf_properties_show(f);
    std::fclose(f);
    std::string_view rest(table, table_size);
    while (!rest.empty()) {
      const auto nl = rest.find('\n');
      const std::string_view line = rest.substr(0, nl);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      const auto bar = line.find('|');
      if (bar == std::string_view::npos || line.starts_with("Property") || line.starts_with("-"))
        continue;
      std::string_view name = line.substr(0, bar);
      while (!name.empty() && name.back() == ' ')
        name.remove_suffix(1);
      if (!name.empty())
        out.emplace_back(name);
    }
    std::free(table);
    return out;
  }();
  return {known.begin(), known.end()};
}

}  // namespace

std::vector<std::pair<std::string, std::string>> kafka_sink::rejected_settings(
    const std::map<std::string, std::string>& settings) {
  std::vector<std::pair<std::string, std::string>> out;
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  for (const auto& [key, value] : settings)
    if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), errstr, sizeof errstr) !=
        RD_KAFKA_CONF_OK) {
      std::string reason = errstr;
      while (!reason.empty() && std::isspace(static_cast<unsigned char>(reason.back())))
        reason.pop_back();
      if (reason.starts_with("No such configuration property"))
        if (const auto near = config::nearest(key, known_properties()); !near.empty())
          reason += fmt::format("; did you mean '{}'?", near);
      out.emplace_back(key, std::move(reason));
    }
  rd_kafka_conf_destroy(conf);
  // What librdkafka refuses only when the producer starts, against the idempotence the
  // sink always turns on (it keeps each table's events in order across retries).
  for (const auto& [key, value] : settings) {
    if (key == "enable.idempotence" && value != "true")
      out.emplace_back(key, "the Kafka sink always uses an idempotent producer (it keeps each "
                            "table's events in order across retries); remove the setting");
    if ((key == "acks" || key == "request.required.acks") && value != "all" && value != "-1")
      out.emplace_back(key, "an idempotent producer needs acks = all (-1), which the Kafka "
                            "sink always uses; remove the setting");
  }
  return out;
}

result<std::unique_ptr<kafka_sink>> kafka_sink::create(const config::kafka_options& options) {
  auto config_error = [](std::string message) {
    return std::unexpected(error{errc::sink_config, std::move(message)});
  };
  const auto& s = options.settings;
  // The same brokers said twice are no conflict; other ones are (which would win?).
  for (std::string_view key : {"bootstrap.servers", "metadata.broker.list"})
    if (auto it = s.find(std::string(key)); it != s.end() && it->second != options.brokers)
      return config_error(fmt::format(
          "events.kafka.settings.\"{}\" = \"{}\" differs from events.kafka.brokers (\"{}\"): "
          "set the brokers with events.kafka.brokers only",
          key, it->second, options.brokers));
  if (auto it = s.find("enable.idempotence"); it != s.end() && it->second != "true")
    return config_error(fmt::format(
        "events.kafka.settings.\"enable.idempotence\" = {}: the Kafka sink always uses an "
        "idempotent producer (it keeps each table's events in order across retries); remove "
        "the setting",
        it->second));

  auto p = std::make_unique<impl>();
  p->options = options;
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  auto set = [&](const std::string& key, const std::string& value_set, bool from_settings) -> status {
    if (rd_kafka_conf_set(conf, key.c_str(), value_set.c_str(), errstr, sizeof errstr) ==
        RD_KAFKA_CONF_OK)
      return {};
    // A secret is not repeated in the error, which the run JSON and its events keep (a
    // misspelled "sasl.pasword" is rejected with its value).
    const std::string value = config::names_secret(key) ? std::string("***") : value_set;
    return std::unexpected(
        error{errc::sink_config,
              from_settings
                  ? fmt::format("events.kafka.settings.\"{}\" = \"{}\": librdkafka rejected it: "
                                "{}; correct or remove the setting in flotilla.toml (the events "
                                "wait in the outbox and go with the next run)",
                                key, value, errstr)
                  : fmt::format("events.kafka: librdkafka rejected {} = \"{}\": {}; correct it "
                                "in flotilla.toml (the events wait in the outbox and go with the "
                                "next run)",
                                key, value, errstr)});
  };
  auto fail = [&](error e) {
    rd_kafka_conf_destroy(conf);
    return std::unexpected(std::move(e));
  };
  // Every rejected setting at once, so one edit of flotilla.toml fixes them all.
  std::optional<error> rejected;
  for (const auto& [key, value] : s)
    if (auto st = set(key, value, true); !st) {
      if (!rejected)
        rejected = std::move(st.error());
      else
        rejected->message = fmt::format("{}; also {}", rejected->message, st.error().message);
    }
  if (rejected)
    return fail(std::move(*rejected));
  if (auto st = set("bootstrap.servers", options.brokers, false); !st)
    return fail(std::move(st.error()));
  if (auto st = set("enable.idempotence", "true", false); !st)
    return fail(std::move(st.error()));
  const bool has_timeout =
      setting_is(s, "message.timeout.ms") || setting_is(s, "delivery.timeout.ms");
  if (!has_timeout)
    if (auto st = set("message.timeout.ms", std::to_string(default_message_timeout.count()), false);
        !st)
      return fail(std::move(st.error()));
  std::size_t size = sizeof errstr;
  // 0 is librdkafka's "no limit": a run then waits its default, and gives up after it.
  if (rd_kafka_conf_get(conf, "message.timeout.ms", errstr, &size) == RD_KAFKA_CONF_OK)
    if (const long ms = std::strtol(errstr, nullptr, 10); ms > 0)
      p->timeout = milliseconds(ms);
  rd_kafka_conf_set_opaque(conf, p.get());
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_error_cb(conf, on_error);
  rd_kafka_conf_set_log_cb(conf, on_log);
  p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (p->rk == nullptr) {
    // librdkafka names the settings at odds (`acks` must be set to `all` when
    // `enable.idempotence` is true): the ones flotilla.toml sets, with their values.
    std::string named;
    for (const auto& [key, value] : s)
      if (std::string_view(errstr).find("`" + key + "`") != std::string_view::npos)
        named += fmt::format("{}events.kafka.settings.\"{}\" = \"{}\"", named.empty() ? "" : ", ",
                             key, config::names_secret(key) ? std::string("***") : value);
    return fail(error{
        errc::sink_config,
        named.empty()
            ? fmt::format("events.kafka: the Kafka producer could not be created: {}; correct "
                          "[events.kafka.settings] in flotilla.toml (the events wait in the "
                          "outbox and go with the next run)",
                          errstr)
            : fmt::format("{}: the Kafka producer could not be created: {} (the sink always "
                          "uses an idempotent producer); correct or remove the setting in "
                          "flotilla.toml (the events wait in the outbox and go with the next "
                          "run)",
                          named, errstr)});
  }
  return std::unique_ptr<kafka_sink>(new kafka_sink(std::move(p)));
}

std::string kafka_sink::destination() const { return impl_->where(); }

bool kafka_sink::wants_json() const { return impl_->options.format == config::event_format::json; }

milliseconds kafka_sink::delivery_timeout() const { return impl_->timeout; }

delivery kafka_sink::deliver(std::span<const storage::pb::OutboxEntry> batch,
                             milliseconds timeout) {
  impl& p = *impl_;
  const auto deadline = clock::now() + timeout;
  auto left = [&] {
    return std::max<long>(
        0, std::chrono::duration_cast<milliseconds>(deadline - clock::now()).count());
  };
  ++p.generation;
  p.states.assign(batch.size(), state::pending);
  p.first_failure = RD_KAFKA_RESP_ERR_NO_ERROR;
  p.first_failure_text.clear();
  p.first_failure_event.clear();
  const bool want_json = p.options.format == config::event_format::json;

  std::size_t produced = 0;
  message m;
  for (; produced < batch.size(); ++produced) {
    const auto& entry = batch[produced];
    // In the sink's format, whatever form the outbox holds the event in: as it is when
    // the outbox already holds that form, else decoded and encoded once.
    build_message(entry, want_json, m);
    const std::string_view content_type = m.content_type;
    // Never a null pointer: librdkafka would send a null header, not an empty one.
    const std::string_view type = m.type.empty() ? std::string_view("") : m.type;
    const std::string_view run_id = m.run_id.empty() ? std::string_view("") : m.run_id;
    const std::int64_t timestamp_ms = m.timestamp_ms;
    const std::string_view payload = m.value;
    const std::string& topic = entry.topic().empty() ? p.options.topic : entry.topic();
    const auto tag = (static_cast<std::uintptr_t>(p.generation) << 32) | produced;
    for (;;) {
      rd_kafka_resp_err_t err = rd_kafka_producev(
          p.rk, RD_KAFKA_V_TOPIC(topic.c_str()),
          RD_KAFKA_V_KEY(entry.key().data(), entry.key().size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(payload.data()), payload.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_TIMESTAMP(timestamp_ms),
          RD_KAFKA_V_HEADER("content-type", content_type.data(),
                            static_cast<ssize_t>(content_type.size())),
          RD_KAFKA_V_HEADER("flotilla-event-type", type.data(), static_cast<ssize_t>(type.size())),
          RD_KAFKA_V_HEADER("flotilla-run-id", run_id.data(), static_cast<ssize_t>(run_id.size())),
          RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(tag)), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        break;
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && left() > 0 && !stop_requested()) {
        rd_kafka_poll(p.rk, 50);  // let deliveries make room
        continue;
      }
      // Refused before it left (too large, bad topic name, or the queue stayed full):
      // stop here, so nothing after it overtakes it.
      p.states[produced] = state::failed;
      if (p.first_failure == RD_KAFKA_RESP_ERR_NO_ERROR) {
        p.first_failure = err;
        p.first_failure_text = rd_kafka_err2str(err);
        // The event's sequence in its run, read from a JSON payload (only here, on the
        // failure path); else the entry's place in the outbox.
        std::string sequence = fmt::format("outbox entry {}", entry.sequence());
        if (const auto at = payload.find("\"sequence\":"); at != std::string::npos) {
          std::size_t end = at + 11;
          while (end < payload.size() && payload[end] >= '0' && payload[end] <= '9')
            ++end;
          if (end > at + 11)
            sequence = "sequence " + std::string(payload.substr(at + 11, end - at - 11));
        }
        p.first_failure_event = fmt::format("'{}' ({}, {} bytes, {} of run {})", entry.key(),
                                            type.empty() ? std::string_view("event") : type,
                                            payload.size(), sequence, run_id);
      }
      break;
    }
    if (p.states[produced] == state::failed)
      break;
    rd_kafka_poll(p.rk, 0);
  }

  // Waited for in slices. A stop asked for meanwhile leaves a healthy broker 2 s to take
  // the events (a producer's first delivery may pause about a second), then ends the wait.
  std::optional<std::chrono::steady_clock::time_point> stopped_at;
  const auto flushed = [&] {
    for (;;) {
      const long slice = std::min<long>(left(), 100);
      if (rd_kafka_flush(p.rk, static_cast<int>(slice)) == RD_KAFKA_RESP_ERR_NO_ERROR)
        return true;
      if (left() == 0)
        return false;
      if (stop_requested()) {
        const auto now = std::chrono::steady_clock::now();
        if (!stopped_at)
          stopped_at = now;
        else if (now - *stopped_at >= std::chrono::seconds(2))
          return false;
      }
    }
  };
  if (!flushed()) {
    // Not everything was acknowledged in time: abandon the rest (it stays in the outbox).
    rd_kafka_purge(p.rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_flush(p.rk, 200);
  }

  delivery d;
  while (d.delivered < batch.size() && p.states[d.delivered] == state::delivered)
    ++d.delivered;
  if (d.delivered > 0)
    d.delivered_through = batch[d.delivered - 1].sequence();
  if (d.delivered == batch.size())
    return d;

  char fatal[512];
  if (rd_kafka_resp_err_t f = rd_kafka_fatal_error(p.rk, fatal, sizeof fatal);
      f != RD_KAFKA_RESP_ERR_NO_ERROR) {
    d.failure = error{errc::broker_refused,
                      fmt::format("Kafka ({}) stopped the producer with a fatal error: {} ({}). "
                                  "Check the topic and this client's permissions on it",
                                  p.where(), fatal, rd_kafka_err2name(f))};
  } else if (p.first_failure == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
    // Sent again as it is, it is refused again, and holds back every event after it.
    d.failure = error{
        errc::broker_refused,
        fmt::format("Kafka ({}) refused event {} as too large ({}): it is over the producer's "
                    "message.max.bytes ({}) or the topic's max.message.bytes. Raise them "
                    "([events.kafka.settings] \"message.max.bytes\" = ..., and "
                    "max.message.bytes on the topic); until then it stays in the outbox and the "
                    "events after it wait",
                    p.where(),
                    p.first_failure_event.empty() ? std::string("of this batch")
                                                  : p.first_failure_event,
                    p.first_failure_text,
                    p.options.settings.contains("message.max.bytes")
                        ? fmt::format("set to {}", p.options.settings.at("message.max.bytes"))
                        : std::string("librdkafka's default 1000000"))};
  } else if (p.first_failure != RD_KAFKA_RESP_ERR_NO_ERROR && !unreachable(p.first_failure)) {
    d.failure =
        error{errc::broker_refused,
              fmt::format("Kafka ({}) refused the events: {} ({}). Check that the topic "
                          "exists and that this client may write to it (ACLs, "
                          "events.kafka.settings)",
                          p.where(), p.first_failure_text, rd_kafka_err2name(p.first_failure))};
  } else {
    std::string reason = p.reason_text();
    if (reason.empty())
      reason = p.first_failure != RD_KAFKA_RESP_ERR_NO_ERROR ? p.first_failure_text
                                                             : std::string("no answer");
    // Purged by the stop: the events were still waiting in the producer.
    if (stopped_at && reason.find("Purged") != std::string::npos)
      reason = "they were still queued in the producer";
    // Purged at the deadline, no other word from librdkafka: the brokers took the
    // connection and never answered (a hung or overloaded broker).
    else if (reason.find("Purged") != std::string::npos)
      reason = "the brokers gave no answer in that time (connected, but not responding: a "
               "hung or overloaded broker, or a network that drops the packets)";
    // librdkafka gives each message message.timeout.ms at most, however long the relay
    // would wait.
    const std::string waited =
        stopped_at ? std::string("had not acknowledged the events 2 s after the stop")
                   : fmt::format("did not acknowledge the events within {} ms",
                                 std::min(timeout, p.timeout).count());
    d.failure = error{errc::broker_unreachable,
                      fmt::format("Kafka ({}) {}: {}. Check that the brokers are up and "
                                  "reachable from this machine (events.kafka.brokers in "
                                  "flotilla.toml)",
                                  p.where(), waited, reason)};
  }
  return d;
}

}  // namespace flotilla::events
