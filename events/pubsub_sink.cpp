#include "events/pubsub_sink.hpp"

#include <cstdlib>
#include <mutex>

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

std::size_t collect(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

/// The service's own message from an error body, or the body itself.
std::string api_message(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string())
    return j["error"]["message"].get<std::string>();
  return body.size() > 300 ? body.substr(0, 300) + "..." : body;
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
    return config_error("needs a project");
  if (target.topic.empty())
    return config_error("needs a topic");
  if (target.emulator_host.empty())
    if (const char* env = std::getenv("PUBSUB_EMULATOR_HOST"); env && *env)
      target.emulator_host = env;
  std::string base, token;
  if (!target.emulator_host.empty()) {
    base = "http://" + target.emulator_host;
  } else {
    base = "https://pubsub.googleapis.com";
    const char* t = std::getenv("GOOGLE_OAUTH_ACCESS_TOKEN");
    if (t == nullptr || *t == '\0')
      return config_error(
          "publishes to the real Pub/Sub service, which needs an OAuth access token in "
          "GOOGLE_OAUTH_ACCESS_TOKEN (e.g. from `gcloud auth print-access-token`); or set "
          "emulator_host (or PUBSUB_EMULATOR_HOST) to use the emulator");
    token = t;
  }
  return std::unique_ptr<pubsub_client>(
      new pubsub_client(std::move(target), std::move(base), std::move(token)));
}

std::string pubsub_client::destination() const {
  return fmt::format("{} {}, project {}, topic {}",
                     target_.emulator_host.empty() ? "service" : "emulator",
                     target_.emulator_host.empty() ? base_url_ : target_.emulator_host,
                     target_.project, target_.topic);
}

pubsub_client::http_result pubsub_client::request(const std::string& method,
                                                  const std::string& url,
                                                  const std::string& body) {
  http_result r;
  auto* c = static_cast<CURL*>(curl_);
  if (c == nullptr) {
    r.transport = CURLE_FAILED_INIT;
    r.transport_error = "libcurl could not be initialised";
    return r;
  }
  curl_easy_reset(c);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  std::string auth;
  if (!token_.empty()) {
    auth = "Authorization: Bearer " + token_;
    headers = curl_slist_append(headers, auth.c_str());
  }
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(target_.timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<std::int64_t>(target_.timeout.count(), 10000)));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  r.transport = curl_easy_perform(c);
  if (r.transport != CURLE_OK)
    r.transport_error = errbuf[0] ? errbuf : curl_easy_strerror(r.transport);
  else
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(headers);
  return r;
}

status pubsub_client::ensure_topic() {
  const std::string url =
      fmt::format("{}/v1/projects/{}/topics/{}", base_url_, target_.project, target_.topic);
  auto r = request(target_.emulator_host.empty() ? "GET" : "PUT", url, "");
  if (r.transport != CURLE_OK)
    return std::unexpected(error{
        errc::broker_unreachable,
        fmt::format("Pub/Sub ({}) did not answer: {}. Check that it is up and reachable "
                    "(events.pubsub in flotilla.toml)",
                    destination(), r.transport_error)});
  // 409: it exists already.
  if (r.status / 100 != 2 && r.status != 409)
    return std::unexpected(error{
        errc::broker_refused,
        fmt::format("Pub/Sub ({}) refused the topic: HTTP {}: {}. Create the topic or grant "
                    "this client access to it",
                    destination(), r.status, api_message(r.body))});
  topic_checked_ = true;
  return {};
}

pubsub_client::outcome pubsub_client::publish(std::span<const pubsub_message> messages) {
  outcome out;
  if (!topic_checked_ && !target_.emulator_host.empty())
    if (auto st = ensure_topic(); !st) {
      out.failure = st.error();
      return out;
    }
  const std::string url = fmt::format("{}/v1/projects/{}/topics/{}:publish", base_url_,
                                      target_.project, target_.topic);
  std::size_t next = 0;
  while (next < messages.size()) {
    nlohmann::json body{{"messages", nlohmann::json::array()}};
    std::size_t bytes = 0, n = 0;
    while (next + n < messages.size() && n < max_messages_per_request) {
      const auto& m = messages[next + n];
      nlohmann::json jm{{"data", base64(m.data)}};
      if (!m.ordering_key.empty())
        jm["orderingKey"] = m.ordering_key;
      if (!m.attributes.empty())
        jm["attributes"] = m.attributes;
      const auto size = m.data.size() * 4 / 3 + 256;
      if (n > 0 && bytes + size > max_bytes_per_request)
        break;
      bytes += size;
      body["messages"].push_back(std::move(jm));
      ++n;
    }
    auto r = request("POST", url, body.dump());
    if (r.transport != CURLE_OK) {
      out.failure = error{errc::broker_unreachable,
                          fmt::format("Pub/Sub ({}) did not acknowledge the events: {}. Check "
                                      "that it is up and reachable (events.pubsub in "
                                      "flotilla.toml)",
                                      destination(), r.transport_error)};
      return out;
    }
    if (r.status / 100 != 2) {
      out.failure = error{r.status >= 500 || r.status == 429 ? errc::broker_unreachable
                                                             : errc::broker_refused,
                          fmt::format("Pub/Sub ({}) refused the events: HTTP {}: {}",
                                      destination(), r.status, api_message(r.body))};
      return out;
    }
    next += n;
    out.acknowledged = next;
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
  auto c = pubsub_client::create(std::move(t));
  if (!c)
    return std::unexpected(std::move(c.error()));
  return std::unique_ptr<pubsub_sink>(new pubsub_sink(std::move(*c), options.format));
}

std::string pubsub_sink::destination() const { return client_->destination(); }

std::chrono::milliseconds pubsub_sink::delivery_timeout() const {
  return client_->target().timeout;
}

delivery pubsub_sink::deliver(std::span<const storage::pb::OutboxEntry> batch,
                              std::chrono::milliseconds /*timeout*/) {
  const bool want_json = format_ == config::event_format::json;
  std::vector<pubsub_message> messages;
  messages.reserve(batch.size());
  for (const auto& entry : batch) {
    auto event = entry.format() == storage::pb::PAYLOAD_FORMAT_JSON ? from_json(entry.payload())
                                                                     : from_protobuf(entry.payload());
    pubsub_message m;
    m.ordering_key = entry.key();
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
  auto o = client_->publish(messages);
  delivery d;
  d.delivered = o.acknowledged;
  if (d.delivered > 0)
    d.delivered_through = batch[d.delivered - 1].sequence();
  d.failure = std::move(o.failure);
  return d;
}

}  // namespace flotilla::events
