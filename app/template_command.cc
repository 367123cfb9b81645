// `pdserve template`: prints the prompt a model's chat template renders for a conversation, as
// the gateway renders it for /v1/chat/completions (the model's own Jinja template, else the
// built-in format; "developer" messages as "system").
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "app/commands.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::app {
namespace {

struct TemplateOptions {
  std::string model;
  std::string messages;  // a file, or "-" for stdin
  bool no_generation_prompt = false;
};

// The conversation in `text`: a JSON array of {role, content}, or an object with "messages".
Result<std::vector<tokenizer::ChatMessage>> ParseMessages(const std::string& text,
                                                          const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(origin + ": not valid JSON: " + e.what());
  }
  if (doc.is_object() && doc.contains("messages")) doc = doc["messages"];
  if (!doc.is_array()) {
    return InvalidArgument(origin +
                           ": expected a JSON array of messages, or an object with "
                           "\"messages\"");
  }
  std::vector<tokenizer::ChatMessage> messages;
  for (size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& m = doc[i];
    const std::string where = origin + ": messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return InvalidArgument(where + " is not an object");
    auto role = m.find("role");
    auto content = m.find("content");
    if (role == m.end() || !role->is_string()) {
      return InvalidArgument(where + ".role must be a string");
    }
    if (content == m.end() || !content->is_string()) {
      return InvalidArgument(where + ".content must be a string");
    }
    std::string name = role->get<std::string>();
    messages.push_back({name == "developer" ? "system" : name, content->get<std::string>()});
  }
  return messages;
}

Result<std::string> ReadInput(const std::string& path) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path);
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void AddTemplateCommand(CLI::App& app) {
  auto options = std::make_shared<TemplateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "template", "Print the prompt a model's chat template renders for a conversation");
  cmd->add_option("--model", options->model,
                  "model directory (tokenizer.json, tokenizer_config.json, chat_template.jinja)")
      ->required();
  cmd->add_option("--messages", options->messages,
                  "JSON file: an array of {\"role\", \"content\"}, or an object with "
                  "\"messages\"; - reads stdin")
      ->required();
  cmd->add_flag("--no-generation-prompt", options->no_generation_prompt,
                "render without add_generation_prompt (no assistant header at the end)");
  cmd->footer(
      "The prompt's exact text goes to stdout, with no newline added. A template that fails\n"
      "(its raise_exception, e.g. for roles that do not alternate) exits 1 with its message.");
  cmd->callback([options] {
    auto tokenizer = tokenizer::Tokenizer::Load(options->model);
    if (!tokenizer.ok()) Fail("template", tokenizer.status());
    auto text = ReadInput(options->messages);
    if (!text.ok()) Fail("template", text.status());
    auto messages = ParseMessages(*text, options->messages == "-" ? "stdin" : options->messages);
    if (!messages.ok()) Fail("template", messages.status());
    auto prompt = (*tokenizer)->chat_template().Apply(*messages, !options->no_generation_prompt);
    if (!prompt.ok()) Fail("template", prompt.status());
    std::cout << *prompt;
    std::cout.flush();
    if (!std::cout) Fail("template", Unavailable("cannot write to stdout"));
  });
}

}  // namespace pdserve::app
