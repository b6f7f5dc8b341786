#include "events/pubsub_sink.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <curl/curl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "events/event.hpp"

namespace flotilla::events {
namespace {

constexpr std::size_t max_messages_per_request = 1000;
constexpr std::size_t max_bytes_per_request = 9 * 1024 * 1024;  // the API takes 10 MB

std::string base64(std::string_view in) {
  static constexpr char table[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const auto n = (std::uint32_t(std::uint8_t(in[i])) << 16) |
                   (std::uint32_t(std::uint8_t(in[i + 1])) << 8) | std::uint8_t(in[i + 2]);
    out += table[(n >> 18) & 63];
    out += table[(n >> 12) & 63];
    out += table[(n >> 6) & 63];
    out += table[n & 63];
  }
  if (i < in.size()) {
    std::uint32_t n = std::uint32_t(std::uint8_t(in[i])) << 16;
    if (i + 1 < in.size())
      n |= std::uint32_t(std::uint8_t(in[i + 1])) << 8;
    out += table[(n >> 18) & 63];
    out += table[(n >> 12) & 63];
    out += i + 1 < in.size() ? table[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

/// libcurl's progress callback: a request ends once the run is asked to stop, after a
/// first ~100 ms in which a healthy server still answers. `start` points at its start.
int stop_when_asked(void* start, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto began = *static_cast<const std::chrono::steady_clock::time_point*>(start);
  return stop_requested() &&
                 std::chrono::steady_clock::now() - began >= std::chrono::milliseconds(100)
             ? 1
             : 0;
}

std::size_t collect(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

/// A URL path segment: topic names may hold `%` and `+`.
std::string segment(const std::string& name) {
  char* e = curl_easy_escape(nullptr, name.c_str(), static_cast<int>(name.size()));
  if (e == nullptr)
    return name;
  std::string out(e);
  curl_free(e);
  return out;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

/// The service's own message from an error body, or the body itself.
std::string api_message(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string()) {
    auto m = j["error"]["message"].get<std::string>();
    while (!m.empty() && (m.back() == '.' || std::isspace(static_cast<unsigned char>(m.back()))))
      m.pop_back();  // the caller's sentence goes on after it
    return m;
  }
  std::string text = body.size() > 300 ? body.substr(0, 300) + "..." : body;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.pop_back();
  return text.empty() ? std::string("(no message)") : text;
}

}  // namespace

struct pubsub_client::http_result {
  CURLcode transport = CURLE_OK;
  std::string transport_error;
  long status = 0;
  std::string body;
};

pubsub_client::pubsub_client(pubsub_target target, std::string base_url, std::string token)
    : target_(std::move(target)), base_url_(std::move(base_url)), token_(std::move(token)) {
  global_init();
  curl_ = curl_easy_init();
}

pubsub_client::~pubsub_client() {
  if (curl_)
    curl_easy_cleanup(static_cast<CURL*>(curl_));
}

result<std::unique_ptr<pubsub_client>> pubsub_client::create(pubsub_target target) {
  auto config_error = [&](std::string why) {
    return std::unexpected(error{errc::sink_config,
                                 fmt::format("[events.pubsub] {}; fix flotilla.toml", why)});
  };
  if (target.project.empty())
    return config_error("needs a project (the Google Cloud project id)");
  if (target.topic.empty())
    return config_error("needs a topic");
  if (target.timeout.count() <= 0)
    target.timeout = std::chrono::milliseconds(30000);
  if (target.emulator_host.empty())
    if (const char* env = std::getenv("PUBSUB_EMULATOR_HOST"); env && *env)
      target.emulator_host = env;
  std::string base, token;
  if (!target.emulator_host.empty()) {
    base = target.emulator_host.starts_with("http://") ? target.emulator_host
                                                       : "http://" + target.emulator_host;
  } else {
    base = target.endpoint.empty() ? "https://pubsub.googleapis.com" : target.endpoint;
    while (base.ends_with('/'))
      base.pop_back();
    token = target.access_token;
    if (token.empty())
      if (const char* t = std::getenv("GOOGLE_OAUTH_ACCESS_TOKEN"); t != nullptr)
        token = t;
    if (token.empty())
      return std::unexpected(error{errc::sink_config, fmt::format(
          "[events.pubsub] (project {}, topic {}) publishes to the real Pub/Sub service, which "
          "needs an OAuth "
          "access token in the environment variable GOOGLE_OAUTH_ACCESS_TOKEN (e.g. "
          "`export GOOGLE_OAUTH_ACCESS_TOKEN=$(gcloud auth print-access-token)`); or set "
          "events.pubsub.emulator_host (or PUBSUB_EMULATOR_HOST) to use the emulator. The "
          "events wait in the outbox until then",
          target.project, target.topic)});
  }
  return std::unique_ptr<pubsub_client>(
      new pubsub_client(std::move(target), std::move(base), std::move(token)));
}

std::string pubsub_client::destination() const {
  return fmt::format("{}, topic projects/{}/topics/{}",
                     emulator() ? "emulator " + target_.emulator_host : base_url_,
                     target_.project, target_.topic);
}

pubsub_client::http_result pubsub_client::request(const std::string& method,
                                                  const std::string& url,
                                                  const std::string& body,
                                                  std::chrono::milliseconds timeout) {
  http_result r;
  auto* c = static_cast<CURL*>(curl_);
  if (c == nullptr) {
    r.transport = CURLE_FAILED_INIT;
    r.transport_error = "libcurl could not be initialised";
    return r;
  }
  curl_easy_reset(c);  // keeps the live connection
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  std::string auth;
  if (!token_.empty()) {
    auth = "Authorization: Bearer " + token_;
    headers = curl_slist_append(headers, auth.c_str());
  }
  const long ms = std::max<long>(1, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::min<long>(ms, 10000));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  const auto began = std::chrono::steady_clock::now();
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, stop_when_asked);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &began);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  if (emulator())
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // the emulator is spoken to directly
  r.transport = curl_easy_perform(c);
  if (r.transport != CURLE_OK)
    r.transport_error = errbuf[0] ? errbuf : curl_easy_strerror(r.transport);
  else
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(headers);
  return r;
}

error pubsub_client::failure(const http_result& r, std::string_view doing,
                             std::string_view object) const {
  const std::string where = destination();
  if (r.transport != CURLE_OK)
    return error{errc::broker_unreachable,
                 fmt::format("Pub/Sub ({}) did not answer when {}: {}. {}", where, doing,
                             r.transport_error,
                             emulator()
                                 ? fmt::format("Check that the emulator runs and listens on {} "
                                               "(emulator_host in {} of flotilla.toml, "
                                               "or PUBSUB_EMULATOR_HOST)",
                                               target_.emulator_host, target_.section)
                                 : std::string("Check that this machine reaches the service "
                                               "(network, proxy, DNS)"))};
  const std::string said = api_message(r.body);
  if (r.status == 429 || r.status >= 500)
    return error{errc::broker_unreachable,
                 fmt::format("Pub/Sub ({}) could not {} for now: HTTP {}: {}. The service "
                             "is overloaded or unavailable; nothing to change",
                             where,
                             object.starts_with("to ") ? std::string(object.substr(3))
                                                       : fmt::format("take {}", object),
                             r.status, said)};
  std::string todo;
  if (r.status == 401)
    todo = "The access token is missing, invalid or expired (they last an hour): renew "
           "GOOGLE_OAUTH_ACCESS_TOKEN, e.g. with `gcloud auth print-access-token`";
  else if (r.status == 403)
    todo = fmt::format("Grant the account behind GOOGLE_OAUTH_ACCESS_TOKEN the Pub/Sub Publisher "
                       "role on the topic (roles/pubsub.publisher), and check that the Pub/Sub "
                       "API is enabled in project {}",
                       target_.project);
  else if (r.status == 404)
    todo = emulator() ? fmt::format("Check events.pubsub.project ({}) against the projects the "
                                    "emulator accepts (its --projects option)",
                                    target_.project)
                      : fmt::format("Create the topic (`gcloud pubsub topics create {} --project "
                                    "{}`), or fix events.pubsub.project and topic",
                                    target_.topic, target_.project);
  else
    todo = "Check events.pubsub.project and topic in flotilla.toml (topic names: letters, "
           "digits, - _ . ~ + %, 3 to 255 characters, starting with a letter); a message "
           "over 10 MB is refused too";
  return error{errc::broker_refused, fmt::format("Pub/Sub ({}) refused {}: HTTP {}: {}. {}", where,
                                                 object, r.status, said, todo)};
}

status pubsub_client::ensure_topic() {
  const std::string url =
      fmt::format("{}/v1/projects/{}/topics/{}", base_url_, segment(target_.project),
                  segment(target_.topic));
  auto r = request(emulator() ? "PUT" : "GET", url, emulator() ? "{}" : "", target_.timeout);
  // Overloaded or unavailable for now (429, 5xx): asked twice more, as a publish is.
  for (const auto wait : {std::chrono::milliseconds(200), std::chrono::milliseconds(1000)}) {
    if (r.transport != CURLE_OK || (r.status != 429 && r.status < 500))
      break;
    std::this_thread::sleep_for(wait);
    r = request(emulator() ? "PUT" : "GET", url, emulator() ? "{}" : "", target_.timeout);
  }
  // 409: it exists already.
  if (r.transport != CURLE_OK || (r.status / 100 != 2 && r.status != 409))
    return std::unexpected(
        emulator() ? failure(r, "creating the topic", "to create the topic")
                   : failure(r, "looking up the topic", "the topic lookup"));
  topic_checked_ = true;
  return {};
}

pubsub_client::outcome pubsub_client::publish(std::span<const pubsub_message> messages,
                                              std::optional<std::chrono::milliseconds> timeout) {
  using clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  const auto deadline = clock::now() + timeout.value_or(target_.timeout);
  auto left = [&] {
    const auto remaining = std::chrono::ceil<milliseconds>(deadline - clock::now());
    return std::min(target_.timeout, std::max(milliseconds(1), remaining));
  };
  outcome out;
  if (messages.empty())
    return out;
  if (!topic_checked_ && emulator())
    if (auto st = ensure_topic(); !st) {
      out.failure = st.error();
      return out;
    }
  const std::string url = fmt::format("{}/v1/projects/{}/topics/{}:publish", base_url_,
                                      segment(target_.project), segment(target_.topic));
  std::size_t next = 0;
  std::string body;
  while (next < messages.size()) {
    // One request: as many messages as the API takes, in order.
    body = R"({"messages":[)";
    std::size_t n = 0;
    while (next + n < messages.size() && n < max_messages_per_request) {
      const auto& m = messages[next + n];
      nlohmann::json jm{{"data", base64(m.data)}};
      if (!m.ordering_key.empty())
        jm["orderingKey"] = m.ordering_key;
      if (!m.attributes.empty())
        jm["attributes"] = m.attributes;
      // Invalid UTF-8 in a key or attribute must not throw: it becomes U+FFFD.
      const std::string text = jm.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (n > 0 && body.size() + text.size() + 3 > max_bytes_per_request)
        break;
      if (n > 0)
        body += ',';
      body += text;
      ++n;
    }
    body += "]}";
    // Transient answers (429, 5xx) are retried with a short back-off while time is left;
    // a transport failure (refused, timed out) is not: the relay tries again next run.
    // On the emulator a 404 means the topic is gone (the emulator restarted and forgot
    // it): it is created again, once, and the request repeated.
    http_result r;
    bool recreated = false;
    for (int attempt = 0;; ++attempt) {
      r = request("POST", url, body, left());
      if (emulator() && r.transport == CURLE_OK && r.status == 404 && !recreated) {
        recreated = true;
        if (auto st = ensure_topic(); !st) {
          out.failure = st.error();
          return out;
        }
        r = request("POST", url, body, left());
      }
      const bool transient = r.transport == CURLE_OK && (r.status == 429 || r.status >= 500);
      if (!transient || attempt == 2)
        break;
      const auto pause = milliseconds(attempt == 0 ? 200 : 1000);
      if (clock::now() + pause >= deadline || stop_requested())
        break;
      std::this_thread::sleep_for(pause);
    }
    if (r.transport != CURLE_OK || r.status / 100 != 2) {
      out.failure = failure(r, "sending the events", "the events");
      return out;
    }
    // Pub/Sub answers a publish with one message ID per message: an answer without them
    // did not come from Pub/Sub (a proxy, another service at emulator_host), and nothing
    // says the events arrived.
    std::size_t ids = 0;
    try {
      const auto answer = nlohmann::json::parse(r.body);
      if (answer.is_object() && answer.contains("messageIds") && answer["messageIds"].is_array())
        ids = answer["messageIds"].size();
    } catch (const nlohmann::json::exception&) {
    }
    if (ids != n) {
      std::string said = r.body.substr(0, 200);
      for (char& ch : said)
        if (ch == '\n' || ch == '\r')
          ch = ' ';
      out.failure = error{
          errc::broker_refused,
          fmt::format("Pub/Sub ({}) answered HTTP {} to a publish of {} event(s) with {} "
                      "message ID(s) ({}{}): not Pub/Sub's answer, so nothing confirms the "
                      "events arrived; they stay in the outbox. Check that {} points at "
                      "Pub/Sub and that no proxy answers in its place",
                      destination(), r.status, n, ids, said.empty() ? "an empty body" : said,
                      r.body.size() > said.size() ? "..." : "",
                      emulator() ? "emulator_host (or PUBSUB_EMULATOR_HOST)"
                                 : std::string("the service address"))};
      return out;
    }
    next += n;
    out.acknowledged = next;
    if (next < messages.size() && clock::now() >= deadline) {
      out.failure = error{errc::broker_unreachable,
                          fmt::format("Pub/Sub ({}) did not take all the events within {} ms "
                                      "({} of {} acknowledged); the rest go out next time",
                                      destination(),
                                      timeout.value_or(target_.timeout).count(), next,
                                      messages.size())};
      return out;
    }
  }
  return out;
}

// ---- the event sink ------------------------------------------------------------------

pubsub_sink::pubsub_sink(std::unique_ptr<pubsub_client> client, config::event_format format)
    : client_(std::move(client)), format_(format) {}

result<std::unique_ptr<pubsub_sink>> pubsub_sink::create(const config::pubsub_options& options) {
  pubsub_target t;
  t.emulator_host = options.emulator_host;
  t.project = options.project;
  t.topic = options.topic;
  return create(std::move(t), options.format);
}

result<std::unique_ptr<pubsub_sink>> pubsub_sink::create(pubsub_target target,
                                                         config::event_format format) {
  auto c = pubsub_client::create(std::move(target));
  if (!c)
    return std::unexpected(std::move(c.error()));
  return std::unique_ptr<pubsub_sink>(new pubsub_sink(std::move(*c), format));
}

std::string pubsub_sink::destination() const { return client_->destination(); }

std::chrono::milliseconds pubsub_sink::delivery_timeout() const {
  return client_->target().timeout;
}

namespace {

/// The ordering key of an event: its key (<source>.<table>, the run id), or, past the 1,024
/// bytes the service takes (a table name of a thousand characters), its first 1,000 bytes
/// (whole UTF-8 characters) then `~` and an FNV-1a hash of the whole key: still one key
/// per table, so its events keep their order, and never a refusal that would hold back
/// every event after it.
std::string ordering_key_of(const std::string& key) {
  constexpr std::size_t most = 1024;
  if (key.size() <= most)
    return key;
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  std::size_t cut = 1000;
  while (cut > 0 && (static_cast<unsigned char>(key[cut]) & 0xC0) == 0x80)
    --cut;  // not inside a character
  return fmt::format("{}~{:016x}", key.substr(0, cut), h);
}

}  // namespace

delivery pubsub_sink::deliver(std::span<const storage::pb::OutboxEntry> batch,
                              std::chrono::milliseconds timeout) {
  const bool want_json = format_ == config::event_format::json;
  std::vector<pubsub_message> messages;
  messages.reserve(batch.size());
  for (const auto& entry : batch) {
    if (const std::string* ready = ready_payload(entry, want_json)) {
      // Written from the event with its headers (outbox_entry): sent as it is.
      pubsub_message m;
      m.ordering_key = ordering_key_of(entry.key());
      m.data = *ready;
      m.attributes = {{"content-type", want_json ? "application/json" : "application/x-protobuf"},
                      {"flotilla-event-type", entry.headers().type()},
                      {"flotilla-run-id", entry.headers().run_id()}};
      messages.push_back(std::move(m));
      continue;
    }
    auto event = entry.format() == storage::pb::PAYLOAD_FORMAT_JSON
                     ? from_json(entry.payload())
                     : from_protobuf(entry.payload());
    pubsub_message m;
    m.ordering_key = ordering_key_of(entry.key());
    if (event) {
      m.data = want_json ? to_json(*event) : to_protobuf(*event);
      m.attributes = {{"content-type", want_json ? "application/json" : "application/x-protobuf"},
                      {"flotilla-event-type", event->type()},
                      {"flotilla-run-id", event->run_id()}};
    } else {
      m.data = entry.payload();  // unreadable here: pass it on untouched
    }
    messages.push_back(std::move(m));
  }
  auto o = client_->publish(messages, timeout);
  delivery d;
  d.delivered = o.acknowledged;
  if (d.delivered > 0)
    d.delivered_through = batch[d.delivered - 1].sequence();
  d.failure = std::move(o.failure);
  return d;
}

}  // namespace flotilla::events
