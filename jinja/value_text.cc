#include "jinja/value_text.h"

#include <algorithm>
#include <cmath>

#include "jinja/python_str.h"

namespace pdserve::jinja {
namespace {

void AppendRepr(const Value& value, std::string& out);

void AppendSequenceRepr(const Sequence& sequence, std::string& out) {
  if (sequence.kind == SequenceKind::kIterator) {
    out += "<generator object>";
    return;
  }
  const bool tuple = sequence.kind == SequenceKind::kTuple;
  out += tuple ? '(' : '[';
  for (size_t i = 0; i < sequence.items.size(); ++i) {
    if (i > 0) out += ", ";
    AppendRepr(sequence.items[i], out);
  }
  if (tuple && sequence.items.size() == 1) out += ',';
  out += tuple ? ')' : ']';
}

void AppendDictRepr(const Dict& dict, std::string& out) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : dict.entries()) {
    if (!first) out += ", ";
    first = false;
    out += py::Repr(key);
    out += ": ";
    AppendRepr(value, out);
  }
  out += '}';
}

void AppendObjectText(const Value& value, std::string& out) {
  switch (value.kind()) {
    case Value::Kind::kNone:
      out += "None";
      return;
    case Value::Kind::kBool:
      out += value.bool_value() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      out += std::to_string(value.int_value());
      return;
    case Value::Kind::kFloat:
      out += py::FloatRepr(value.float_value());
      return;
    case Value::Kind::kSequence:
      AppendSequenceRepr(value.sequence(), out);
      return;
    case Value::Kind::kDict:
      AppendDictRepr(value.dict(), out);
      return;
    case Value::Kind::kNamespace:
      out += "<Namespace ";
      AppendDictRepr(value.namespace_attributes(), out);
      out += '>';
      return;
    case Value::Kind::kCallable:
      if (value.callable().kind == CallableKind::kMacro) {
        out += "<Macro " + py::Repr(value.callable().name) + ">";
      } else {
        out += "<function " + value.callable().name + ">";
      }
      return;
    case Value::Kind::kLoop: {
      const LoopState& loop = value.loop();
      out += "<LoopContext " + std::to_string(loop.index0 + 1) + "/" +
             std::to_string(loop.items->items.size()) + ">";
      return;
    }
    case Value::Kind::kUndefined:
    case Value::Kind::kString:
      break;
  }
}

void AppendRepr(const Value& value, std::string& out) {
  if (value.is_string()) {
    out += py::Repr(value.string());
  } else if (value.is_undefined()) {
    out += "Undefined";
  } else {
    AppendObjectText(value, out);
  }
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto unicode_escape = [&](char32_t c) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(c >> shift) & 0xF];
  };
  out += '"';
  for (char32_t c : py::Decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
      if (c > 0xFFFF) {
        char32_t v = c - 0x10000;
        unicode_escape(0xD800 | (v >> 10));
        unicode_escape(0xDC00 | (v & 0x3FF));
      } else {
        unicode_escape(c);
      }
    } else {
      py::AppendUtf8(c, out);
    }
  }
  out += '"';
}

struct JsonWriter {
  const JsonOptions& options;
  std::string item_separator;
  std::string key_separator;
  std::string out;
  int level = 0;

  void NewLine() {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *options.indent;
  }

  Status Write(const Value& value) {
    switch (value.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return Status::Ok();
      case Value::Kind::kBool:
        out += value.bool_value() ? "true" : "false";
        return Status::Ok();
      case Value::Kind::kInt:
        out += std::to_string(value.int_value());
        return Status::Ok();
      case Value::Kind::kFloat: {
        double d = value.float_value();
        if (std::isnan(d)) {
          out += "NaN";
        } else if (std::isinf(d)) {
          out += d < 0 ? "-Infinity" : "Infinity";
        } else {
          out += py::FloatRepr(d);
        }
        return Status::Ok();
      }
      case Value::Kind::kString:
        AppendJsonString(value.string(), options.ensure_ascii, out);
        return Status::Ok();
      case Value::Kind::kSequence:
        if (value.sequence().kind != SequenceKind::kIterator) return WriteList(value.sequence());
        break;
      case Value::Kind::kDict:
        return WriteDict(value.dict());
      default:
        break;
    }
    return InvalidArgument("Object of type " + std::string(value.TypeName()) +
                           " is not JSON serializable");
  }

  Status WriteList(const Sequence& sequence) {
    if (sequence.items.empty()) {
      out += "[]";
      return Status::Ok();
    }
    out += '[';
    ++level;
    if (options.indent) NewLine();
    for (size_t i = 0; i < sequence.items.size(); ++i) {
      if (i > 0) {
        out += item_separator;
        if (options.indent) NewLine();
      }
      PDSERVE_RETURN_IF_ERROR(Write(sequence.items[i]));
    }
    --level;
    if (options.indent) NewLine();
    out += ']';
    return Status::Ok();
  }

  Status WriteDict(const Dict& dict) {
    if (dict.empty()) {
      out += "{}";
      return Status::Ok();
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : dict.entries()) entries.push_back(&entry);
    if (options.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    out += '{';
    ++level;
    if (options.indent) NewLine();
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) {
        out += item_separator;
        if (options.indent) NewLine();
      }
      AppendJsonString(entries[i]->first, options.ensure_ascii, out);
      out += key_separator;
      PDSERVE_RETURN_IF_ERROR(Write(entries[i]->second));
    }
    --level;
    if (options.indent) NewLine();
    out += '}';
    return Status::Ok();
  }
};

}  // namespace

std::string Str(const Value& value) {
  if (value.is_string()) return value.string();
  if (value.is_undefined()) return {};
  std::string out;
  AppendObjectText(value, out);
  return out;
}

std::string Repr(const Value& value) {
  std::string out;
  AppendRepr(value, out);
  return out;
}

Result<std::string> ToJson(const Value& value, const JsonOptions& options) {
  JsonWriter writer{options, "", "", "", 0};
  if (options.separators) {
    writer.item_separator = options.separators->first;
    writer.key_separator = options.separators->second;
  } else {
    writer.item_separator = options.indent ? "," : ", ";
    writer.key_separator = ": ";
  }
  PDSERVE_RETURN_IF_ERROR(writer.Write(value));
  return std::move(writer.out);
}

}  // namespace pdserve::jinja
