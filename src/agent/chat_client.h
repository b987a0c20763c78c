#pragma once
// Talking to an OpenAI-compatible Chat Completions endpoint over HTTP (libcurl): one request per
// call, a per-request time limit, bounded retries on time-outs, connection errors, 429 and 5xx, and a
// transcript (JSONL) of every request and response. The API key is read from an environment variable
// and only ever placed in the Authorization header: never logged, never in the transcript.
#include <chrono>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace fact::agent {

// The LLM as the agent sees it: messages (+ the one tool it must call) in, the assistant message out.
class ChatBackend {
 public:
  virtual ~ChatBackend() = default;
  // Throws Error when no usable HTTP response came back after the retries (the message says why).
  virtual nlohmann::json complete(const nlohmann::json& messages, const nlohmann::json& tool) = 0;
  virtual std::string model() const = 0;
};

struct ChatClientOptions {
  std::string endpoint;                 // base URL, e.g. https://api.openai.com/v1 (…/chat/completions is appended)
  std::string model;
  std::string api_key_env = "OPENAI_API_KEY";  // empty variable or unset: no Authorization header
  std::chrono::seconds timeout{120};    // per request
  int max_retries = 2;                  // extra attempts after the first
  std::chrono::milliseconds backoff{500};  // doubled on each retry
  double temperature = 0.2;
  std::filesystem::path transcript;     // JSONL; empty: none
};

class ChatClient : public ChatBackend {
 public:
  explicit ChatClient(ChatClientOptions options);
  nlohmann::json complete(const nlohmann::json& messages, const nlohmann::json& tool) override;
  std::string model() const override { return options_.model; }
  std::string url() const { return url_; }

 private:
  ChatClientOptions options_;
  std::string url_;
  std::string api_key_;
  int request_count_ = 0;
  void record(nlohmann::json entry) const;
};

}  // namespace fact::agent
