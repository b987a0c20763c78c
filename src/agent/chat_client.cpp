#include "agent/chat_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/error.h"

namespace fact::agent {
using nlohmann::json;

namespace {

size_t append_body(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct HttpResult {
  long status = 0;         // 0: no HTTP response (curl error)
  std::string body;
  std::string curl_error;
  bool timed_out = false;
};

HttpResult post_json(const std::string& url, const std::string& body, const std::string& api_key,
                     std::chrono::seconds timeout) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  HttpResult r;
  CURL* curl = curl_easy_init();
  if (!curl) {
    r.curl_error = "curl_easy_init failed";
    return r;
  }
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  std::string auth = api_key.empty() ? "" : "Authorization: Bearer " + api_key;
  if (!auth.empty()) headers = curl_slist_append(headers, auth.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // threads + time-outs: no SIGALRM
  CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  else {
    r.curl_error = curl_easy_strerror(rc);
    r.timed_out = rc == CURLE_OPERATION_TIMEDOUT;
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return r;
}

std::string redact(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at))
    text.replace(at, secret.size(), "[redacted]");
  return text;
}

}  // namespace

ChatClient::ChatClient(ChatClientOptions options) : options_(std::move(options)) {
  if (options_.endpoint.empty()) throw Error("--endpoint is required with --agent llm (e.g. https://api.openai.com/v1)");
  if (options_.model.empty()) throw Error("--model is required with --agent llm (the endpoint's model name)");
  if (options_.endpoint.rfind("http://", 0) != 0 && options_.endpoint.rfind("https://", 0) != 0)
    throw Error("--endpoint '" + options_.endpoint + "' must start with http:// or https://");
  url_ = options_.endpoint;
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  const std::string suffix = "/chat/completions";
  if (url_.size() < suffix.size() || url_.compare(url_.size() - suffix.size(), suffix.size(), suffix) != 0) url_ += suffix;
  if (!options_.api_key_env.empty())
    if (const char* k = std::getenv(options_.api_key_env.c_str()); k) api_key_ = k;
}

void ChatClient::record(json entry) const {
  if (options_.transcript.empty()) return;
  std::ofstream out(options_.transcript, std::ios::app);
  out << redact(entry.dump(), api_key_) << "\n";
}

json ChatClient::complete(const json& messages, const json& tool) {
  json request = {{"model", options_.model}, {"messages", messages}, {"temperature", options_.temperature}};
  if (!tool.is_null()) {
    request["tools"] = json::array({{{"type", "function"}, {"function", tool}}});
    request["tool_choice"] = {{"type", "function"}, {"function", {{"name", tool.at("name")}}}};
  }
  const std::string body = request.dump();
  int id = ++request_count_;
  std::string last_problem;
  auto wait = options_.backoff;
  for (int attempt = 0; attempt <= options_.max_retries; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(wait);
      wait *= 2;
    }
    record({{"request", id}, {"attempt", attempt}, {"url", url_}, {"body", request}});
    auto t0 = std::chrono::steady_clock::now();
    HttpResult r = post_json(url_, body, api_key_, options_.timeout);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    json entry = {{"response", id}, {"attempt", attempt}, {"seconds", secs}, {"status", r.status}};
    if (r.status == 0) {
      entry["error"] = r.curl_error;
      record(entry);
      last_problem = r.timed_out ? fmt::format("no reply within {} s (per-request time limit)", options_.timeout.count())
                                 : "no HTTP response: " + r.curl_error;
      continue;
    }
    json parsed = json::parse(r.body, nullptr, false);
    entry["body"] = parsed.is_discarded() ? json(r.body.substr(0, 4000)) : parsed;
    record(entry);
    if (r.status == 429 || r.status >= 500) {
      last_problem = fmt::format("HTTP {} from the endpoint", r.status);
      continue;
    }
    if (r.status != 200)
      throw Error(fmt::format("the LLM endpoint {} answered HTTP {}: {} (check --endpoint, --model and ${})", url_,
                              r.status, redact(r.body.substr(0, 300), api_key_), options_.api_key_env));
    if (parsed.is_discarded() || !parsed.contains("choices") || !parsed["choices"].is_array() || parsed["choices"].empty() ||
        !parsed["choices"][0].contains("message")) {
      last_problem = "the HTTP response is not a Chat Completions object (no choices[0].message)";
      continue;
    }
    return parsed["choices"][0]["message"];
  }
  throw Error(fmt::format("the LLM endpoint {} gave no usable reply after {} attempts: {}", url_,
                          options_.max_retries + 1, last_problem));
}

}  // namespace fact::agent
