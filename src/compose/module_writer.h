#pragma once
// Stage 3: the composed module. From a plan and its pattern verdicts, one Python file whose
// `class ModelNew(Model)` replays the IR graph with each accepted pattern as one torch.ops.fact call,
// plus manifest.json describing what was taken from FACT and what PyTorch kept, and why.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compose/pattern_verdicts.h"
#include "discover/plan.h"

namespace fact::compose {

inline constexpr int kComposedManifestVersion = 1;
inline constexpr const char* kComposedModuleFile = "model_new.py";
inline constexpr const char* kUserModelCopy = "user_model.py";  // the user's file, as ModelNew imports it
inline constexpr const char* kOpLibraryCopy = "libfact_ops.so";  // the op library, copied beside the module
inline constexpr const char* kReferenceOpsCopy = "reference_ops.py";  // PyTorch references of the ops (CPU tests)
inline constexpr const char* kReferenceDirCopy = "reference";  // each family's reference op, found by reference_ops.py

// The text of model_new.py (from templates/compose/model_new.py.in). Throws Error naming the node
// when an argument cannot be written as Python or an accepted pattern lacks its a/b operands.
std::string model_new_source(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts);

struct ComposeSources {
  std::filesystem::path model;        // the user's KernelBench-style file
  std::string plan;                   // where the plan came from (recorded in the manifest)
  std::string tune_report;            // where the tune report came from
  std::string op_library;             // the built op library (libfact_ops.so), empty if not given
};

nlohmann::json composed_manifest(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts,
                                 const ComposeSources& sources);

// Writes DIR/model_new.py, DIR/user_model.py, DIR/manifest.json, DIR/reference_ops.py and, when
// sources.op_library is given, a copy of it as DIR/libfact_ops.so: the folder runs with PyTorch alone.
// Everything is generated first, then written to a sibling folder and renamed, so a failure leaves no DIR
// behind. An existing DIR is replaced only if it holds an earlier composed module. A graph that cannot be
// written back as Python turns every accepted verdict into a rejected one with the reason; returns the
// verdicts the module was written with.
std::vector<PatternVerdict> write_composed_module(const discover::Plan& plan, std::vector<PatternVerdict> verdicts,
                                                  const ComposeSources& sources, const std::filesystem::path& dir);

}  // namespace fact::compose
