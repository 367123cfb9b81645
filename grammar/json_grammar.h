// JsonGrammar: a JSON Schema compiled for constrained decoding, a graph of nodes that
// GrammarMatcher (grammar/grammar_matcher.h) walks byte by byte. The output it admits is compact
// JSON (no whitespace between tokens), objects' properties in the schema's order (a required one
// is never skipped, an optional one may be; no property the schema does not declare), so every
// text it completes parses and validates against the schema whatever the weights chose.
// Supported: type (one or a list), properties, required, additionalProperties (no extra property
// is generated, so any value is honoured), items, minItems, maxItems, minLength, maxLength,
// enum, const, anyOf, a
// one-element allOf, $ref to "#", "#/$defs/..." or "#/definitions/..." (recursion included),
// and the annotations (title, description, default, examples, $schema, $id, $comment). Any
// other keyword (pattern, minimum, format, oneOf, ...) is refused with its name and where it is,
// so that nobody gets an answer the schema does not hold for. Compiling is pure; a JsonGrammar
// is immutable and may be shared by threads. Called by the gateway (to refuse a bad schema with
// a 400) and by the engine (to constrain a sequence).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pdserve::grammar {

enum class NodeKind : uint8_t {
  kObject,     // declared properties in order
  kAnyObject,  // any keys, any values
  kArray,      // items of one node, min_items..max_items of them
  kString,     // any JSON string
  kNumber,     // any JSON number
  kInteger,    // digits with an optional minus
  kLiterals,   // one of a set of JSON texts (enum, const, true, false, null)
  kAnyOf,      // one of its alternatives (never a frame of its own: the matcher expands it)
  kSequence,   // its alternatives' values one after the other (fixed text around a value)
};

struct Property {
  std::string key;  // the key as it is written, quotes and colon included: "\"name\":"
  int32_t value = -1;
  bool required = false;
};

struct Node {
  NodeKind kind = NodeKind::kString;
  std::vector<Property> properties;  // kObject
  // kObject: the first required property at or after index i (properties.size(): none).
  std::vector<int32_t> first_required_from;
  int32_t items = -1;                 // kArray: the items; kAnyObject: the values
  int32_t keys = -1;                  // kAnyObject: the string node its keys are read by
  int32_t min_items = 0;              // kArray
  int32_t max_items = -1;             // kArray; -1: no bound
  std::vector<std::string> literals;  // kLiterals: compact JSON texts, sorted, distinct
  std::vector<int32_t> alternatives;  // kAnyOf; kSequence: its parts in order
};

class JsonGrammar {
 public:
  const Node& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  int32_t root() const { return root_; }
  size_t num_nodes() const { return nodes_.size(); }
  // The compact text of the schema it was compiled from (the key of caches of compiled
  // grammars and of their token masks).
  const std::string& source() const { return source_; }

 private:
  friend class SchemaCompiler;
  std::vector<Node> nodes_;
  int32_t root_ = -1;
  std::string source_;
};

// Limits on what a client's schema may make.
inline constexpr int kMaxGrammarNodes = 10000;
inline constexpr int kMaxLiteralBytes = 4096;

// Compiles a schema, parsed keeping its keys in order (properties are generated in it).
// InvalidArgument names the keyword at fault and its JSON pointer:
// "unsupported JSON Schema keyword 'pattern' at /properties/zip".
Result<std::shared_ptr<const JsonGrammar>> CompileJsonSchema(const nlohmann::ordered_json& schema);
// The same from the schema's JSON text; with `prefix` or `suffix`, the value comes between
// those fixed texts (a model's tool-call syntax), which may be any bytes.
Result<std::shared_ptr<const JsonGrammar>> CompileJsonSchemaText(std::string_view text,
                                                                 std::string_view prefix = {},
                                                                 std::string_view suffix = {});

// The schema of OpenAI's response_format {"type": "json_object"}: any JSON object.
inline constexpr char kAnyJsonObjectSchema[] = R"({"type":"object"})";

}  // namespace pdserve::grammar
