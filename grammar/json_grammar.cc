#include "grammar/json_grammar.h"

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace pdserve::grammar {

using json = nlohmann::ordered_json;

namespace {

constexpr int kMaxSchemaDepth = 64;
// minItems, maxItems, minLength and maxLength at most: each count below it is a grammar state.
constexpr int64_t kMaxCount = 10000;

const std::set<std::string>& Annotations() {
  static const std::set<std::string> names = {"title",    "description", "default",  "examples",
                                              "$schema",  "$id",         "$comment", "deprecated",
                                              "readOnly", "writeOnly"};
  return names;
}

const std::set<std::string>& Supported() {
  static const std::set<std::string> names = {
      "type",  "properties",  "required",  "additionalProperties",
      "items", "minItems",    "maxItems",  "enum",
      "const", "anyOf",       "allOf",     "$ref",
      "$defs", "definitions", "minLength", "maxLength"};
  return names;
}

std::string Where(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

std::string Child(const std::string& pointer, std::string_view key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return pointer + "/" + escaped;
}

std::string Compact(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root), g_(std::make_shared<JsonGrammar>()) {}

  Result<std::shared_ptr<const JsonGrammar>> Run(std::string_view prefix = {},
                                                 std::string_view suffix = {}) {
    PDSERVE_ASSIGN_OR_RETURN(g_->root_, Compile(root_, "", 0));
    if (!prefix.empty() || !suffix.empty()) {
      Node sequence{.kind = NodeKind::kSequence};
      if (!prefix.empty()) {
        PDSERVE_ASSIGN_OR_RETURN(const int32_t id, Literals({std::string(prefix)}, ""));
        sequence.alternatives.push_back(id);
      }
      sequence.alternatives.push_back(g_->root_);
      if (!suffix.empty()) {
        PDSERVE_ASSIGN_OR_RETURN(const int32_t id, Literals({std::string(suffix)}, ""));
        sequence.alternatives.push_back(id);
      }
      PDSERVE_ASSIGN_OR_RETURN(g_->root_, Add(std::move(sequence)));
    }
    PDSERVE_RETURN_IF_ERROR(CheckNoEmptyCycle());
    g_->source_ = Compact(root_);
    return std::shared_ptr<const JsonGrammar>(g_);
  }

 private:
  Result<int32_t> Add(Node node) {
    if (static_cast<int>(g_->nodes_.size()) >= kMaxGrammarNodes) {
      return InvalidArgument("the JSON schema makes more than " + std::to_string(kMaxGrammarNodes) +
                             " grammar nodes");
    }
    g_->nodes_.push_back(std::move(node));
    return static_cast<int32_t>(g_->nodes_.size() - 1);
  }

  Result<int32_t> Shared(int32_t* id, Node node) {
    if (*id < 0) {
      PDSERVE_ASSIGN_OR_RETURN(*id, Add(std::move(node)));
    }
    return *id;
  }

  Result<int32_t> StringNode() { return Shared(&string_, Node{.kind = NodeKind::kString}); }

  Result<int32_t> Literals(std::vector<std::string> texts, const std::string& pointer) {
    if (texts.empty()) return InvalidArgument("an empty 'enum' at " + Where(pointer));
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    for (const auto& t : texts) {
      if (static_cast<int>(t.size()) > kMaxLiteralBytes) {
        return InvalidArgument("a value of 'enum' or 'const' at " + Where(pointer) +
                               " is longer than " + std::to_string(kMaxLiteralBytes) + " bytes");
      }
    }
    return Add(Node{.kind = NodeKind::kLiterals, .literals = std::move(texts)});
  }

  Result<int32_t> AnyObject(int32_t values) {
    PDSERVE_ASSIGN_OR_RETURN(const int32_t keys, StringNode());
    return Add(Node{.kind = NodeKind::kAnyObject, .items = values, .keys = keys});
  }

  // Any JSON value: an object, an array, a string, a number, true, false or null.
  Result<int32_t> AnyValue() {
    if (any_value_ >= 0) return any_value_;
    PDSERVE_ASSIGN_OR_RETURN(any_value_, Add(Node{.kind = NodeKind::kAnyOf}));
    PDSERVE_ASSIGN_OR_RETURN(const int32_t object, AnyObject(any_value_));
    PDSERVE_ASSIGN_OR_RETURN(const int32_t array,
                             Add(Node{.kind = NodeKind::kArray, .items = any_value_}));
    PDSERVE_ASSIGN_OR_RETURN(const int32_t string, StringNode());
    PDSERVE_ASSIGN_OR_RETURN(const int32_t number, Add(Node{.kind = NodeKind::kNumber}));
    PDSERVE_ASSIGN_OR_RETURN(const int32_t words, Literals({"false", "null", "true"}, ""));
    g_->nodes_[static_cast<size_t>(any_value_)].alternatives = {object, array, string, number,
                                                                words};
    return any_value_;
  }

  Result<int32_t> Compile(const json& schema, const std::string& pointer, int depth) {
    if (depth > kMaxSchemaDepth) {
      return InvalidArgument("the JSON schema nests deeper than " +
                             std::to_string(kMaxSchemaDepth) + " at " + Where(pointer));
    }
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return AnyValue();
      return InvalidArgument("the schema 'false' at " + Where(pointer) + " admits no value");
    }
    if (!schema.is_object()) {
      return InvalidArgument("the schema at " + Where(pointer) + " must be an object or a boolean");
    }
    bool constraining = false;  // a keyword other than annotations and definitions
    for (const auto& [key, value] : schema.items()) {
      if (Annotations().count(key)) continue;
      if (!Supported().count(key)) {
        return InvalidArgument("unsupported JSON Schema keyword '" + key + "' at " +
                               Where(pointer));
      }
      if (key != "$defs" && key != "definitions") constraining = true;
    }
    auto alone = [&](const char* keyword) -> Status {
      for (const auto& [key, value] : schema.items()) {
        if (key == keyword || Annotations().count(key) || key == "$defs" || key == "definitions")
          continue;
        return InvalidArgument(std::string("'") + keyword + "' beside '" + key + "' at " +
                               Where(pointer) + " is not supported: put '" + key +
                               "' inside each alternative");
      }
      return Status::Ok();
    };
    if (schema.contains("$ref")) {
      PDSERVE_RETURN_IF_ERROR(alone("$ref"));
      return Ref(schema["$ref"], Child(pointer, "$ref"), depth);
    }
    if (schema.contains("allOf")) {
      PDSERVE_RETURN_IF_ERROR(alone("allOf"));
      const json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1) {
        return InvalidArgument("'allOf' at " + Where(pointer) +
                               " must hold exactly one schema (intersections are not supported)");
      }
      return Compile(all[0], Child(Child(pointer, "allOf"), "0"), depth + 1);
    }
    if (schema.contains("anyOf")) {
      PDSERVE_RETURN_IF_ERROR(alone("anyOf"));
      const json& any = schema["anyOf"];
      if (!any.is_array() || any.empty()) {
        return InvalidArgument("'anyOf' at " + Where(pointer) + " must be a non-empty array");
      }
      std::vector<int32_t> alternatives;
      for (size_t i = 0; i < any.size(); ++i) {
        PDSERVE_ASSIGN_OR_RETURN(
            const int32_t id,
            Compile(any[i], Child(Child(pointer, "anyOf"), std::to_string(i)), depth + 1));
        alternatives.push_back(id);
      }
      if (alternatives.size() == 1) return alternatives[0];
      return Add(Node{.kind = NodeKind::kAnyOf, .alternatives = std::move(alternatives)});
    }
    if (schema.contains("const")) return Literals({Compact(schema["const"])}, pointer);
    if (schema.contains("enum")) {
      const json& values = schema["enum"];
      if (!values.is_array()) {
        return InvalidArgument("'enum' at " + Where(pointer) + " must be an array");
      }
      std::vector<std::string> texts;
      for (const json& v : values) texts.push_back(Compact(v));
      return Literals(std::move(texts), pointer);
    }
    if (!constraining) return AnyValue();
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const json& type = schema["type"];
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array() && !type.empty() &&
                 std::all_of(type.begin(), type.end(),
                             [](const json& t) { return t.is_string(); })) {
        types = type.get<std::vector<std::string>>();
      } else {
        return InvalidArgument("'type' at " + Where(pointer) +
                               " must be a type name or a non-empty array of them");
      }
    } else if (schema.contains("properties") || schema.contains("required") ||
               schema.contains("additionalProperties")) {
      types.push_back("object");
    } else {
      types.push_back("array");  // items, minItems or maxItems
    }
    std::vector<int32_t> alternatives;
    for (const auto& type : types) {
      PDSERVE_ASSIGN_OR_RETURN(const int32_t id, Typed(schema, type, pointer, depth));
      alternatives.push_back(id);
    }
    if (alternatives.size() == 1) return alternatives[0];
    return Add(Node{.kind = NodeKind::kAnyOf, .alternatives = std::move(alternatives)});
  }

  Result<int32_t> Typed(const json& schema, const std::string& type, const std::string& pointer,
                        int depth) {
    if (type == "string") return String(schema, pointer);
    if (type == "number") return Shared(&number_, Node{.kind = NodeKind::kNumber});
    if (type == "integer") return Shared(&integer_, Node{.kind = NodeKind::kInteger});
    if (type == "boolean") return Literals({"false", "true"}, pointer);
    if (type == "null") return Literals({"null"}, pointer);
    if (type == "object") return Object(schema, pointer, depth);
    if (type == "array") return Array(schema, pointer, depth);
    return InvalidArgument("unknown 'type' \"" + type + "\" at " + Where(pointer));
  }

  Result<int32_t> Object(const json& schema, const std::string& pointer, int depth) {
    const json* properties = schema.contains("properties") ? &schema["properties"] : nullptr;
    if (properties && !properties->is_object()) {
      return InvalidArgument("'properties' at " + Where(pointer) + " must be an object");
    }
    std::vector<std::string> required;
    if (schema.contains("required")) {
      const json& r = schema["required"];
      if (!r.is_array() ||
          !std::all_of(r.begin(), r.end(), [](const json& n) { return n.is_string(); })) {
        return InvalidArgument("'required' at " + Where(pointer) +
                               " must be an array of property names");
      }
      required = r.get<std::vector<std::string>>();
    }
    // Extra properties are never generated, so additionalProperties only says what values an
    // object without declared properties holds.
    int32_t extra_value = -1;
    if (schema.contains("additionalProperties")) {
      const json& extra = schema["additionalProperties"];
      if (!(extra.is_boolean() && !extra.get<bool>())) {
        PDSERVE_ASSIGN_OR_RETURN(extra_value,
                                 Compile(extra, Child(pointer, "additionalProperties"), depth + 1));
      }
    } else {
      extra_value = -2;  // absent: any value
    }
    const bool declared = (properties && !properties->empty()) || !required.empty();
    if (!declared && extra_value != -1) {
      if (extra_value == -2) {
        PDSERVE_ASSIGN_OR_RETURN(extra_value, AnyValue());
      }
      return AnyObject(extra_value);
    }
    Node node{.kind = NodeKind::kObject};
    if (properties) {
      for (const auto& [name, value] : properties->items()) {
        PDSERVE_ASSIGN_OR_RETURN(
            const int32_t id, Compile(value, Child(Child(pointer, "properties"), name), depth + 1));
        const bool is_required =
            std::find(required.begin(), required.end(), name) != required.end();
        node.properties.push_back({Compact(json(name)) + ":", id, is_required});
      }
    }
    for (const auto& name : required) {
      const std::string key = Compact(json(name)) + ":";
      if (std::any_of(node.properties.begin(), node.properties.end(),
                      [&](const Property& p) { return p.key == key; })) {
        continue;
      }
      // Required but not declared: any value the object's extra properties may hold.
      if (extra_value == -1) {
        return InvalidArgument("'required' at " + Where(pointer) + " names '" + name +
                               "', which 'properties' does not declare and "
                               "'additionalProperties' forbids");
      }
      int32_t value = extra_value;
      if (value == -2) {
        PDSERVE_ASSIGN_OR_RETURN(value, AnyValue());
      }
      node.properties.push_back({key, value, true});
    }
    const int32_t n = static_cast<int32_t>(node.properties.size());
    node.first_required_from.assign(static_cast<size_t>(n) + 1, n);
    for (int32_t i = n - 1; i >= 0; --i) {
      node.first_required_from[static_cast<size_t>(i)] =
          node.properties[static_cast<size_t>(i)].required
              ? i
              : node.first_required_from[static_cast<size_t>(i) + 1];
    }
    return Add(std::move(node));
  }

  Result<int32_t> Array(const json& schema, const std::string& pointer, int depth) {
    Node node{.kind = NodeKind::kArray};
    if (schema.contains("items")) {
      if (schema["items"].is_array()) {
        return InvalidArgument("'items' at " + Where(pointer) +
                               " must be one schema (tuples are not supported)");
      }
      PDSERVE_ASSIGN_OR_RETURN(node.items,
                               Compile(schema["items"], Child(pointer, "items"), depth + 1));
    } else {
      PDSERVE_ASSIGN_OR_RETURN(node.items, AnyValue());
    }
    PDSERVE_RETURN_IF_ERROR(Bounds(schema, pointer, "minItems", "maxItems", &node));
    return Add(std::move(node));
  }

  // A string node: the shared one, or one of its own where minLength or maxLength bound it.
  Result<int32_t> String(const json& schema, const std::string& pointer) {
    if (!schema.contains("minLength") && !schema.contains("maxLength")) return StringNode();
    Node node{.kind = NodeKind::kString};
    PDSERVE_RETURN_IF_ERROR(Bounds(schema, pointer, "minLength", "maxLength", &node));
    return Add(std::move(node));
  }

  // A count's bounds (minItems and maxItems, minLength and maxLength) into the node.
  static Status Bounds(const json& schema, const std::string& pointer, const char* min_key,
                       const char* max_key, Node* node) {
    auto count = [&](const char* key, int32_t* out) -> Status {
      if (!schema.contains(key)) return Status::Ok();
      const json& v = schema[key];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxCount) {
        return InvalidArgument(std::string("'") + key + "' at " + Where(pointer) +
                               " must be an integer from 0 to " + std::to_string(kMaxCount));
      }
      *out = static_cast<int32_t>(v.get<int64_t>());
      return Status::Ok();
    };
    PDSERVE_RETURN_IF_ERROR(count(min_key, &node->min_items));
    PDSERVE_RETURN_IF_ERROR(count(max_key, &node->max_items));
    if (node->max_items >= 0 && node->max_items < node->min_items) {
      return InvalidArgument(std::string("'") + max_key + "' at " + Where(pointer) + " is below '" +
                             min_key + "'");
    }
    return Status::Ok();
  }

  Result<int32_t> Ref(const json& ref, const std::string& pointer, int depth) {
    if (!ref.is_string())
      return InvalidArgument("'$ref' at " + Where(pointer) + " must be a string");
    const std::string target = ref.get<std::string>();
    if (target.empty() || target[0] != '#') {
      return InvalidArgument("'$ref' \"" + target + "\" at " + Where(pointer) +
                             " is not supported: only references within the schema (\"#...\")");
    }
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    const json* resolved = nullptr;
    try {
      resolved = &root_.at(json::json_pointer(target.substr(1)));
    } catch (const json::exception&) {
      return InvalidArgument("'$ref' \"" + target + "\" at " + Where(pointer) +
                             " names nothing in the schema");
    }
    // An alias, filled once the target is compiled, so that the target may refer to itself.
    PDSERVE_ASSIGN_OR_RETURN(const int32_t alias, Add(Node{.kind = NodeKind::kAnyOf}));
    refs_[target] = alias;
    PDSERVE_ASSIGN_OR_RETURN(const int32_t id, Compile(*resolved, target.substr(1), depth + 1));
    g_->nodes_[static_cast<size_t>(alias)].alternatives = {id};
    return alias;
  }

  // An alternative that leads back to itself before any byte (a $ref to itself, an anyOf whose
  // alternative is the anyOf) would make the matcher expand forever.
  Status CheckNoEmptyCycle() const {
    const size_t n = g_->nodes_.size();
    std::vector<int> mark(n, 0);  // 0 unvisited, 1 on the path, 2 done
    std::function<bool(size_t)> cyclic = [&](size_t id) {
      if (mark[id] == 1) return true;
      if (mark[id] == 2) return false;
      mark[id] = 1;
      if (g_->nodes_[id].kind == NodeKind::kAnyOf) {
        for (int32_t alt : g_->nodes_[id].alternatives) {
          if (cyclic(static_cast<size_t>(alt))) return true;
        }
      }
      mark[id] = 2;
      return false;
    };
    for (size_t id = 0; id < n; ++id) {
      if (g_->nodes_[id].kind == NodeKind::kAnyOf && cyclic(id)) {
        return InvalidArgument(
            "the JSON schema refers to itself ('$ref' or 'anyOf') without a value between");
      }
    }
    for (const Node& node : g_->nodes_) {
      if (node.kind == NodeKind::kAnyOf && node.alternatives.empty()) {
        return InvalidArgument("the JSON schema has a '$ref' that never resolves");
      }
    }
    return Status::Ok();
  }

  const json& root_;
  std::shared_ptr<JsonGrammar> g_;
  std::map<std::string, int32_t> refs_;
  int32_t any_value_ = -1, string_ = -1, number_ = -1, integer_ = -1;
};

Result<std::shared_ptr<const JsonGrammar>> CompileJsonSchema(const json& schema) {
  return SchemaCompiler(schema).Run();
}

Result<std::shared_ptr<const JsonGrammar>> CompileJsonSchemaText(std::string_view text,
                                                                 std::string_view prefix,
                                                                 std::string_view suffix) {
  json schema = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return InvalidArgument("the JSON schema is not valid JSON");
  return SchemaCompiler(schema).Run(prefix, suffix);
}

}  // namespace pdserve::grammar
