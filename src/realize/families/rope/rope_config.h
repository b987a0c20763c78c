#pragma once
// One rotary-embedding kernel configuration: the CTA size, the vector width of each access (each thread
// rotates a vector from the first half of a row with the matching vector of the second half) and how many
// such pairs a thread keeps in flight, plus the traits the kernel is specialized on (element, head dim, arch).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "realize/families/rope/rope_problem.h"

namespace fact::realize {

struct RopeConfig {
  Element element = Element::f32;
  Arch arch = Arch::sm90;
  int head_dim = 128;
  int threads_per_cta = 256;
  int vector_elems = 4;       // elements per load/store (16 bytes at most)
  int items_per_thread = 2;   // (first half, second half) vector pairs per thread, loaded before any is stored

  int pairs_per_row() const { return head_dim / 2 / vector_elems; }
  std::string id() const;       // "rope_" + 12 hex digits of the canonical JSON's hash
  std::string summary() const;  // e.g. "sm90 rope float32 d128 t256 v4x2"
  nlohmann::json to_json() const;
  static RopeConfig from_json(const nlohmann::json& j);
};

// Why the config cannot run the problem (a sentence), or empty when it can.
std::string rope_config_rejection(const RopeProblem& problem, const RopeConfig& config);

struct RopeConfigSpace {
  int enumerated = 0;
  std::vector<RopeConfig> ranked;  // best first
};

// The axes come from data/families/rope.json. Throws Error with the commonest pruning reason when no config
// survives.
RopeConfigSpace enumerate_rope_configs(const RopeProblem& problem, int top_n);

}  // namespace fact::realize
