#include "gateway/openai_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "grammar/json_grammar.h"

namespace pdserve::gateway {
namespace {

using nlohmann::json;

// No OpenAI request nests deeper than a few levels (a tool's JSON schema, at most a few dozen);
// a body nesting thousands deep only costs stack wherever it is walked.
constexpr int kMaxRequestNesting = 64;

std::string TypeName(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// Reads an optional field; a present field of the wrong type or range is an error.
struct Reader {
  const json& body;
  std::optional<ApiError> error;

  const json* Find(const char* key) {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  }
  void Fail(std::string message, const char* param) {
    if (!error) error = ApiError::BadRequest(std::move(message), param);
  }
  void Bool(const char* key, bool* out) {
    if (const json* v = Find(key)) {
      if (!v->is_boolean())
        return Fail(std::string("'") + key + "' must be a boolean, got " + TypeName(*v), key);
      *out = v->get<bool>();
    }
  }
  void Number(const char* key, float lo, float hi, float* out) {
    if (const json* v = Find(key)) {
      if (!v->is_number())
        return Fail(std::string("'") + key + "' must be a number, got " + TypeName(*v), key);
      const double d = v->get<double>();
      if (!(d >= lo && d <= hi)) {
        return Fail(std::string("'") + key + "' must be between " +
                        std::to_string(lo).substr(0, 3) + " and " +
                        std::to_string(hi).substr(0, 3) + ", got " + DescribeJson(*v),
                    key);
      }
      *out = static_cast<float>(d);
    }
  }
  void Integer(const char* key, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
    if (const json* v = Find(key)) {
      if (!v->is_number_integer()) {
        return Fail(std::string("'") + key + "' must be an integer, got " + DescribeJson(*v), key);
      }
      // Above INT64_MAX only as an unsigned number, which get<int64_t> would wrap.
      const bool too_large =
          v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
      const int64_t i = too_large ? INT64_MAX : v->get<int64_t>();
      if (too_large || i < lo || i > hi) {
        return Fail(std::string("'") + key + "' must be between " + std::to_string(lo) + " and " +
                        std::to_string(hi) + ", got " + DescribeJson(*v),
                    key);
      }
      *out = i;
    }
  }
};

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<std::string> ContentText(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return std::nullopt;
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object()) return std::nullopt;
    const auto type = part.find("type"), t = part.find("text");
    if (type == part.end() || *type != "text" || t == part.end() || !t->is_string()) {
      return std::nullopt;  // (a type that is no string compares unequal: no exception)
    }
    text += t->get<std::string>();
  }
  return text;
}

void ReadPrompt(Reader& r, GenerationRequest& req) {
  const json* p = r.Find("prompt");
  if (!p) return r.Fail("'prompt' is required", "prompt");
  if (p->is_string()) {
    req.prompt = p->get<std::string>();
    return;
  }
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    req.prompt = (*p)[0].get<std::string>();
    return;
  }
  const json* ids = p;
  if (p->is_array() && p->size() == 1 && (*p)[0].is_array()) ids = &(*p)[0];
  if (ids->is_array() && !ids->empty() && std::all_of(ids->begin(), ids->end(), [](const json& v) {
        return v.is_number_integer() && v.get<int64_t>() >= 0 &&
               v.get<int64_t>() < (int64_t{1} << 31);
      })) {
    req.prompt_token_ids = ids->get<std::vector<int32_t>>();
    return;
  }
  if (p->is_array() && p->size() > 1 && (*p)[0].is_string()) {
    return r.Fail("'prompt' holds several prompts; send one prompt per request", "prompt");
  }
  r.Fail("'prompt' must be a string or an array of token ids", "prompt");
}

// An assistant turn's tool_calls: [{id, type: function, function: {name, arguments}}].
bool ReadToolCalls(Reader& r, const json& calls, const std::string& where, ChatTurn& turn) {
  auto bad = [&](const std::string& what) {
    r.Fail("'" + where + ".tool_calls' " + what, "messages");
    return false;
  };
  if (!calls.is_array()) return bad("must be an array");
  for (const json& call : calls) {
    if (!call.is_object() || !call.contains("id") || !call["id"].is_string()) {
      return bad("entries must have a string 'id'");
    }
    if (call.contains("type") && call["type"] != "function") return bad("must be of type function");
    const json* f = call.contains("function") ? &call["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string() ||
        !f->contains("arguments") || !(*f)["arguments"].is_string()) {
      return bad("entries need a function with a string 'name' and string 'arguments'");
    }
  }
  turn.tool_calls_json = calls.dump();
  return true;
}

void ReadMessages(Reader& r, GenerationRequest& req) {
  const json* m = r.Find("messages");
  if (!m) return r.Fail("'messages' is required", "messages");
  if (!m->is_array() || m->empty())
    return r.Fail("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) return r.Fail("'" + where + "' must be an object", "messages");
    const std::string role =
        msg.value("role", json()).is_string() ? msg["role"].get<std::string>() : "";
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" &&
        role != "tool") {
      return r.Fail("'" + where + ".role' must be one of system, developer, user, assistant, tool",
                    "messages");
    }
    ChatTurn turn{role, ""};
    const bool calls =
        role == "assistant" && msg.contains("tool_calls") && !msg["tool_calls"].is_null();
    if (calls && !ReadToolCalls(r, msg["tool_calls"], where, turn)) return;
    const bool no_content = !msg.contains("content") || msg["content"].is_null();
    if (calls && no_content) {
      turn.null_content = true;
    } else {
      auto content = msg.contains("content") ? ContentText(msg["content"]) : std::nullopt;
      if (!content)
        return r.Fail("'" + where + ".content' must be a string or text parts", "messages");
      turn.content = *content;
    }
    if (role == "tool") {
      if (!msg.contains("tool_call_id") || !msg["tool_call_id"].is_string()) {
        return r.Fail("'" + where + ".tool_call_id' must be a string", "messages");
      }
      turn.tool_call_id = msg["tool_call_id"].get<std::string>();
      if (msg.contains("name") && msg["name"].is_string())
        turn.name = msg["name"].get<std::string>();
    }
    req.messages.push_back(std::move(turn));
  }
}

// tool_choice required or a named function: the output is one call in the model's syntax, its
// arguments valid for the function's parameters, compiled here so that a schema the engine
// cannot enforce is a 400.
void ForceToolCall(Reader& r, const ParseOptions& options, GenerationRequest& req) {
  if (req.tool_choice != ToolChoice::kRequired && req.tool_choice != ToolChoice::kNamed) return;
  if (!req.json_schema.empty()) {
    return r.Fail(
        "'tool_choice' that forces a call and 'response_format' cannot both shape the output",
        "tool_choice");
  }
  std::vector<ToolSpec> tools;
  for (const ToolSpec& t : req.tools) {
    if (req.tool_choice == ToolChoice::kRequired || t.name == req.tool_choice_name) {
      tools.push_back(t);
    }
  }
  auto grammar = ToolChoiceGrammarFor(options.tool_call_format, tools);
  if (!grammar.ok()) return r.Fail("'tool_choice': " + grammar.status().message(), "tool_choice");
  auto compiled = grammar::CompileJsonSchemaText(grammar->schema, grammar->prefix, grammar->suffix);
  if (!compiled.ok()) {
    return r.Fail("'tools': a function's parameters: " + compiled.status().message(), "tools");
  }
  req.json_schema = grammar->schema;
  req.json_prefix = grammar->prefix;
  req.json_suffix = grammar->suffix;
}

// tools, tool_choice and parallel_tool_calls (chat only). The tools are read from `body` parsed
// again keeping its keys' order, which the chat template and the functions' schemas keep.
void ReadTools(Reader& r, std::string_view body, const ParseOptions& options,
               GenerationRequest& req) {
  const json* tools = r.Find("tools");
  const json* choice = r.Find("tool_choice");
  r.Bool("parallel_tool_calls", &req.parallel_tool_calls);
  if (tools && !(tools->is_array() && tools->empty())) {
    if (req.endpoint != Endpoint::kChatCompletions) {
      return r.Fail("'tools' is for chat completions only", "tools");
    }
    if (!tools->is_array()) return r.Fail("'tools' must be an array", "tools");
    const auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
    const auto& list = ordered["tools"];
    for (size_t i = 0; i < list.size(); ++i) {
      const auto& t = list[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
          !t["function"].is_object()) {
        return r.Fail("'" + where + "' must be {\"type\": \"function\", \"function\": {...}}",
                      "tools");
      }
      const auto& f = t["function"];
      const std::string name =
          f.contains("name") && f["name"].is_string() ? f["name"].get<std::string>() : "";
      if (name.empty() || name.size() > 64 || !std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
          })) {
        return r.Fail("'" + where + ".function.name' must be 1-64 letters, digits, _ or -",
                      "tools");
      }
      if (std::any_of(req.tools.begin(), req.tools.end(),
                      [&](const ToolSpec& s) { return s.name == name; })) {
        return r.Fail("'tools' names the function '" + name + "' twice", "tools");
      }
      std::string parameters = R"({"type":"object"})";
      if (f.contains("parameters") && !f["parameters"].is_null()) {
        if (!f["parameters"].is_object()) {
          return r.Fail("'" + where + ".function.parameters' must be a JSON Schema object",
                        "tools");
        }
        parameters = f["parameters"].dump();
      }
      req.tools.push_back({name, parameters});
    }
    req.tools_json = list.dump();
    req.tool_choice = ToolChoice::kAuto;
  }
  if (!choice) return;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none") {
      req.tool_choice = ToolChoice::kNone;
      return;
    }
    if (c != "auto" && c != "required") {
      return r.Fail("'tool_choice' must be none, auto, required or a function", "tool_choice");
    }
    if (req.tools.empty()) return r.Fail("'tool_choice' needs 'tools'", "tool_choice");
    req.tool_choice = c == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
    return ForceToolCall(r, options, req);
  }
  const json* f =
      choice->is_object() && choice->contains("function") ? &(*choice)["function"] : nullptr;
  if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
    return r.Fail(
        "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
        "\"function\": {\"name\": ...}}",
        "tool_choice");
  }
  req.tool_choice_name = (*f)["name"].get<std::string>();
  if (std::none_of(req.tools.begin(), req.tools.end(),
                   [&](const ToolSpec& s) { return s.name == req.tool_choice_name; })) {
    return r.Fail("'tool_choice' names '" + req.tool_choice_name + "', which 'tools' does not hold",
                  "tool_choice");
  }
  req.tool_choice = ToolChoice::kNamed;
  ForceToolCall(r, options, req);
}

// logit_bias: {"token id": bias}, each id in the vocabulary, each bias in [-100, 100].
void ReadLogitBias(Reader& r, const ParseOptions& options, GenerationRequest& req) {
  const json* v = r.Find("logit_bias");
  if (!v) return;
  if (!v->is_object()) return r.Fail("'logit_bias' must be an object of token ids", "logit_bias");
  if (static_cast<int>(v->size()) > options.max_logit_bias) {
    return r.Fail(
        "'logit_bias' names more than " + std::to_string(options.max_logit_bias) + " tokens",
        "logit_bias");
  }
  for (const auto& [key, bias] : v->items()) {
    int64_t id = -1;
    if (!key.empty() && key.size() <= 9 &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      id = std::stoll(key);
    }
    if (id < 0 || (options.vocab_size > 0 && id >= options.vocab_size)) {
      return r.Fail(
          "'logit_bias' key '" + key + "' is not a token id of this model" +
              (options.vocab_size > 0 ? " (0 to " + std::to_string(options.vocab_size - 1) + ")"
                                      : std::string()),
          "logit_bias");
    }
    if (!bias.is_number() || !(bias.get<double>() >= -100 && bias.get<double>() <= 100)) {
      return r.Fail("'logit_bias' values must be numbers from -100 to 100", "logit_bias");
    }
    const auto token = static_cast<int32_t>(id);
    if (std::any_of(req.logit_bias.begin(), req.logit_bias.end(),
                    [&](const auto& b) { return b.first == token; })) {
      return r.Fail("'logit_bias' names token " + key + " twice", "logit_bias");
    }
    req.logit_bias.emplace_back(token, bias.get<float>());
  }
}

// Chat: logprobs (a boolean) and top_logprobs (0..20, only with logprobs); completions:
// logprobs, the number of most likely tokens (0..20, vLLM's bound; OpenAI's is 5).
void ReadLogprobs(Reader& r, GenerationRequest& req) {
  const json* v = r.Find("logprobs");
  if (req.endpoint == Endpoint::kChatCompletions) {
    bool on = false;
    if (v) {
      if (!v->is_boolean()) return r.Fail("'logprobs' must be a boolean", "logprobs");
      on = v->get<bool>();
    }
    std::optional<int64_t> top;
    r.Integer("top_logprobs", 0, 20, &top);
    if (top && !on) {
      return r.Fail("'top_logprobs' needs 'logprobs' to be true", "top_logprobs");
    }
    if (on) req.logprobs = top ? static_cast<int>(*top) : 0;
    return;
  }
  if (!v || (v->is_boolean() && !v->get<bool>())) return;  // false: off, as null
  std::optional<int64_t> top;
  r.Integer("logprobs", 0, 20, &top);
  if (top) req.logprobs = static_cast<int>(*top);
}

// Completions' echo: the prompt before the completion (its logprobs too, with logprobs). Chat
// has none.
void ReadEcho(Reader& r, GenerationRequest& req) {
  const json* v = r.Find("echo");
  if (!v || v->is_null()) return;
  if (!v->is_boolean()) return r.Fail("'echo' must be a boolean", "echo");
  if (!v->get<bool>()) return;
  if (req.endpoint == Endpoint::kChatCompletions) {
    return r.Fail("'echo' is for /v1/completions; chat completions do not echo", "echo");
  }
  req.echo = true;
}

// response_format: text (nothing), json_object (any JSON object) or json_schema, whose schema is
// taken from `body` parsed again keeping its keys' order (properties come out in it) and
// compiled here, so that a schema the engine could not enforce is a 400 naming its keyword.
void ReadResponseFormat(Reader& r, std::string_view body, GenerationRequest& req) {
  const json* v = r.Find("response_format");
  if (!v) return;
  if (!v->is_object() || !v->contains("type") || !(*v)["type"].is_string()) {
    return r.Fail("'response_format' must be an object with a string 'type'", "response_format");
  }
  const std::string type = (*v)["type"].get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    req.json_schema = grammar::kAnyJsonObjectSchema;
    return;
  }
  if (type != "json_schema") {
    return r.Fail(
        "'response_format.type' must be text, json_object or json_schema, got '" + type + "'",
        "response_format");
  }
  const json* spec = v->contains("json_schema") ? &(*v)["json_schema"] : nullptr;
  if (!spec || !spec->is_object()) {
    return r.Fail("'response_format.json_schema' must be an object with 'name' and 'schema'",
                  "response_format");
  }
  if (!spec->contains("name") || !(*spec)["name"].is_string()) {
    return r.Fail("'response_format.json_schema.name' must be a string", "response_format");
  }
  if (spec->contains("strict") && !(*spec)["strict"].is_boolean() && !(*spec)["strict"].is_null()) {
    return r.Fail("'response_format.json_schema.strict' must be a boolean", "response_format");
  }
  if (!spec->contains("schema")) {
    req.json_schema = grammar::kAnyJsonObjectSchema;  // OpenAI: a schema is optional
    return;
  }
  const auto ordered = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  const auto& schema = ordered["response_format"]["json_schema"]["schema"];
  auto compiled = grammar::CompileJsonSchema(schema);
  if (!compiled.ok()) {
    return r.Fail("'response_format.json_schema.schema': " + compiled.status().message(),
                  "response_format");
  }
  req.json_schema = (*compiled)->source();
}

// OpenAI fields that would change what the client gets back and that pdserve does not do: a
// request that sets one (to anything but its "off" value) is refused with the field named, so
// that nobody reads an answer made without it. Fields that change nothing (user, metadata,
// stream_options, ...) are read elsewhere or ignored.
void RefuseUnsupported(Reader& r) {
  auto refuse = [&](const char* key, const char* what) {
    r.Fail(std::string("'") + key + "' is not supported by pdserve (" + what + ")", key);
  };
  auto truthy = [](const json& v) {
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number()) return v.get<double>() != 0;
    if (v.is_string()) return !v.get<std::string>().empty();
    if (v.is_array() || v.is_object()) return !v.empty();
    return false;
  };
  if (const json* v = r.Find("best_of"); v && !(v->is_number_integer() && v->get<int64_t>() == 1)) {
    refuse("best_of", "one completion per request");
  }
  if (const json* v = r.Find("suffix"); v && truthy(*v)) refuse("suffix", "no insertion");
  // The deprecated functions API; its successor, tools, is read by ReadTools.
  if (const json* v = r.Find("functions"); v && truthy(*v)) refuse("functions", "use 'tools'");
  if (const json* v = r.Find("function_call");
      v && !(v->is_string() && v->get<std::string>() == "none")) {
    refuse("function_call", "use 'tool_choice'");
  }
}

}  // namespace

std::variant<GenerationRequest, ApiError> ParseGenerationRequest(std::string_view body,
                                                                 Endpoint endpoint,
                                                                 const ParseOptions& options) {
  if (JsonNestingDepth(body) > kMaxRequestNesting) {
    return ApiError::BadRequest("The request body nests arrays and objects more than " +
                                std::to_string(kMaxRequestNesting) + " deep");
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ApiError::BadRequest("The request body is not valid JSON");
  if (!j.is_object()) return ApiError::BadRequest("The request body must be a JSON object");
  GenerationRequest req;
  req.endpoint = endpoint;
  req.temperature = options.sampling.temperature;
  req.top_p = options.sampling.top_p;
  req.top_k = options.sampling.top_k;
  req.max_tokens = options.sampling.max_tokens;
  Reader r{j, std::nullopt};

  const json* model = r.Find("model");
  if (!model) return ApiError::BadRequest("'model' is required", "model");
  if (!model->is_string()) return ApiError::BadRequest("'model' must be a string", "model");
  req.model = model->get<std::string>();

  if (endpoint == Endpoint::kCompletions) {
    ReadPrompt(r, req);
  } else {
    ReadMessages(r, req);
  }
  r.Bool("stream", &req.stream);
  if (const json* so = r.Find("stream_options")) {
    if (!so->is_object()) {
      r.Fail("'stream_options' must be an object", "stream_options");
    } else if (so->contains("include_usage")) {
      if (!(*so)["include_usage"].is_boolean()) {
        r.Fail("'stream_options.include_usage' must be a boolean", "stream_options");
      } else {
        req.include_usage = (*so)["include_usage"].get<bool>();
      }
    }
    if (!req.stream && !r.error)
      r.Fail("'stream_options' is only allowed when 'stream' is true", "stream_options");
  }
  std::optional<int64_t> max_tokens, max_completion, n, seed, top_k;
  r.Integer("max_tokens", 1, options.max_tokens_limit, &max_tokens);
  r.Integer("max_completion_tokens", 1, options.max_tokens_limit, &max_completion);
  if (max_completion) max_tokens = max_completion;
  if (max_tokens) req.max_tokens = static_cast<int>(*max_tokens);
  r.Integer("n", 1, 128, &n);
  if (n) req.n = static_cast<int>(*n);
  r.Number("temperature", 0.0f, 2.0f, &req.temperature);
  r.Number("top_p", 0.0f, 1.0f, &req.top_p);
  if (req.top_p == 0.0f) r.Fail("'top_p' must be greater than 0", "top_p");
  r.Integer("top_k", -1, 1 << 20, &top_k);
  if (top_k) req.top_k = *top_k < 0 ? 0 : static_cast<int>(*top_k);  // vLLM: -1 means all
  if (const json* v = r.Find("seed"); v && v->is_number_unsigned()) {
    req.seed = v->get<uint64_t>();  // all 64 bits, as sent
  } else {
    r.Integer("seed", INT64_MIN, INT64_MAX, &seed);
    if (seed) req.seed = static_cast<uint64_t>(*seed);
  }
  r.Bool("ignore_eos", &req.ignore_eos);
  r.Bool("return_token_ids", &req.return_token_ids);
  if (const json* stop = r.Find("stop")) {
    if (stop->is_string()) {
      req.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && std::all_of(stop->begin(), stop->end(),
                                               [](const json& s) { return s.is_string(); })) {
      req.stop = stop->get<std::vector<std::string>>();
    } else {
      r.Fail("'stop' must be a string or an array of strings", "stop");
    }
    if (static_cast<int>(req.stop.size()) > options.max_stop_strings) {
      r.Fail("'stop' holds more than " + std::to_string(options.max_stop_strings) + " strings",
             "stop");
    }
    for (const auto& s : req.stop) {
      if (s.empty()) r.Fail("'stop' strings must not be empty", "stop");
    }
  }
  RefuseUnsupported(r);
  ReadLogprobs(r, req);
  ReadEcho(r, req);
  ReadLogitBias(r, options, req);
  ReadResponseFormat(r, body, req);
  ReadTools(r, body, options, req);
  if (req.tool_choice != ToolChoice::kNone) req.tool_call_format = options.tool_call_format;
  if (const json* user = r.Find("user")) {
    if (!user->is_string())
      r.Fail("'user' must be a string", "user");
    else
      req.user = user->get<std::string>();
  }
  if (r.error) return *r.error;
  return req;
}

bool RelaysUpstreamChoices(const GenerationRequest& request) {
  return request.tool_choice != ToolChoice::kNone || request.logprobs >= 0 || request.n > 1 ||
         request.echo;
}

}  // namespace pdserve::gateway
