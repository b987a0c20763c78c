#include "ir/op_table.h"

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"

namespace fact::ir {

namespace {
struct CategoryName {
  OpCategory category;
  const char* name;
};
constexpr CategoryName kCategoryNames[] = {
    {OpCategory::Gemm, "gemm"},         {OpCategory::Attention, "attention"},
    {OpCategory::Elementwise, "elementwise"}, {OpCategory::Reduction, "reduction"},
    {OpCategory::Normalization, "normalization"}, {OpCategory::Softmax, "softmax"},
    {OpCategory::View, "view"},         {OpCategory::Copy, "copy"},
    {OpCategory::Other, "other"},
};
}  // namespace

OpCategory parse_op_category(const std::string& s) {
  for (const auto& c : kCategoryNames)
    if (s == c.name) return c.category;
  throw Error("unknown op category '" + s +
              "'; use one of gemm, attention, elementwise, reduction, normalization, softmax, view, copy, other");
}

const char* to_string(OpCategory c) {
  for (const auto& n : kCategoryNames)
    if (n.category == c) return n.name;
  return "other";
}

OpTable OpTable::load(const std::filesystem::path& path) {
  auto doc = read_json_file(path, "op table");
  const std::string where = "op table '" + path.string() + "'";
  if (!doc.is_object() || doc.value("format", "") != "fact-op-table")
    throw Error(where + " is not a FACT op table (expected \"format\": \"fact-op-table\")");
  if (!doc.contains("ops") || !doc["ops"].is_object())
    throw Error(where + " has no \"ops\" object mapping op name -> {category, commutative, reshape, channels_last}");
  OpTable table;
  for (const auto& [name, entry] : doc["ops"].items()) {
    if (!entry.is_object() || !entry.contains("category") || !entry["category"].is_string())
      throw Error(where + ": op '" + name + "' needs a \"category\" string");
    OpInfo info;
    info.name = name;
    try {
      info.category = parse_op_category(entry["category"].get<std::string>());
    } catch (const Error& e) {
      throw Error(where + ": op '" + name + "': " + e.what());
    }
    if (entry.contains("commutative")) {
      if (!entry["commutative"].is_boolean())
        throw Error(where + ": op '" + name + "': \"commutative\" must be true or false");
      info.commutative = entry["commutative"].get<bool>();
    }
    if (entry.contains("channels_last")) {
      if (!entry["channels_last"].is_boolean())
        throw Error(where + ": op '" + name + "': \"channels_last\" must be true or false");
      info.channels_last = entry["channels_last"].get<bool>();
    }
    if (entry.contains("reshape")) {
      if (!entry["reshape"].is_boolean() || info.category != OpCategory::View)
        throw Error(where + ": op '" + name + "': \"reshape\" must be true or false, on a view op");
      info.reshape = entry["reshape"].get<bool>();
    }
    table.ops_[name] = std::move(info);
  }
  return table;
}

const OpTable& OpTable::builtin() {
  static const OpTable table = load(data_dir() / "ir" / "aten_ops.json");
  return table;
}

const OpInfo* OpTable::find(const std::string& op) const {
  auto it = ops_.find(op);
  return it == ops_.end() ? nullptr : &it->second;
}

}  // namespace fact::ir
