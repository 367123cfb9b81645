// `pdserve generate`: one process, one engine, one prompt. The reference every serving setup
// must match token for token under greedy decoding.
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

#include "app/commands.h"
#include "common/json_text.h"
#include "model/engine.h"
#include "model/model_maker.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::app {
namespace {

struct GenerateFlags {
  std::string model_dir;
  std::string prompt;
  bool chat = false;
  bool json = false;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  int64_t seed = -1;
  int max_tokens = 64;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int threads = 0;
  std::string device = "cpu";
  std::string dtype = "auto";
  int logprobs = -1;             // top count; -1: none
  std::string json_schema_file;  // a response format's schema; "object": any JSON object
};

void Run(const GenerateFlags& f) {
  std::string dir = f.model_dir;
  if (dir.empty()) {
    auto builtin = model::EnsureBuiltinModel();
    if (!builtin.ok()) Fail("generate", builtin.status());
    dir = *builtin;
  }
  model::EngineOptions options;
  options.threads = f.threads;
  options.device = f.device;
  options.dtype = f.dtype;
  auto engine = model::Engine::Load(dir, options);
  if (!engine.ok()) Fail("generate", engine.status());
  auto tokenizer = tokenizer::Tokenizer::Load(dir);
  if (!tokenizer.ok()) Fail("generate", tokenizer.status());

  Result<std::vector<int32_t>> prompt = std::vector<int32_t>();
  if (f.chat) {
    const tokenizer::ChatMessage message{"user", f.prompt};
    auto text = (*tokenizer)->chat_template().Apply(std::span(&message, 1), true);
    if (!text.ok()) Fail("generate", text.status());
    prompt = (*tokenizer)->Encode(*text, /*add_special=*/false);
  } else {
    prompt = (*tokenizer)->Encode(f.prompt, /*add_special=*/true);
  }
  if (!prompt.ok()) Fail("generate", prompt.status());

  model::SamplingParams params;
  params.temperature = f.temperature;
  params.top_p = f.top_p;
  params.top_k = f.top_k;
  if (f.seed >= 0) params.seed = static_cast<uint64_t>(f.seed);
  params.max_tokens = f.max_tokens;
  params.stop = f.stop;
  params.ignore_eos = f.ignore_eos;
  params.logprobs = f.logprobs;
  if (f.json_schema_file == "object") {
    params.json_schema = "{\"type\":\"object\"}";
  } else if (!f.json_schema_file.empty()) {
    std::ifstream in(f.json_schema_file);
    if (!in) Fail("generate", NotFound(f.json_schema_file + ": cannot read the schema"));
    params.json_schema.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (int32_t id : (*tokenizer)->eos_ids()) params.stop_token_ids.push_back(id);
  if (f.ignore_eos) params.stop_token_ids.clear();
  auto id = (*engine)->Add(*prompt, params);
  if (!id.ok()) Fail("generate", id.status());

  tokenizer::IncrementalDetokenizer detok(*tokenizer);
  tokenizer::StopStringMatcher stops(f.stop);
  std::vector<int32_t> generated;
  nlohmann::json logprobs = nlohmann::json::array();
  std::string text;
  std::string finish = "length";
  auto emit = [&](const std::string& piece) {
    text += piece;
    if (!f.json) std::cout << piece << std::flush;
  };
  std::vector<model::TokenEvent> events;
  while ((*engine)->HasWork()) {
    events.clear();
    Status s = (*engine)->Step(&events);
    if (!s.ok()) Fail("generate", s);
    for (const auto& e : events) {
      if (e.is_stop_token) {
        finish = "stop";
        continue;
      }
      generated.push_back(e.token);
      if (e.has_logprob) {
        nlohmann::json top = nlohmann::json::array();
        for (const auto& [id, lp] : e.top_logprobs) top.push_back({{"id", id}, {"logprob", lp}});
        logprobs.push_back({{"id", e.token}, {"logprob", e.logprob}, {"top_logprobs", top}});
      }
      emit(stops.Push(detok.Add(e.token)));
      if (stops.stopped()) {
        finish = "stop";
        (*engine)->Cancel(e.seq_id);
      } else if (e.finish != model::FinishReason::kNone) {
        finish = model::FinishReasonName(e.finish);
      }
    }
  }
  if (!stops.stopped()) emit(stops.Push(detok.Flush()) + stops.Flush());
  if (f.json) {
    nlohmann::json out = {{"model", (*engine)->config().model_id},
                          {"prompt_tokens", prompt->size()},
                          {"tokens", generated},
                          {"text", text},
                          {"finish_reason", finish}};
    if (f.logprobs >= 0) out["logprobs"] = logprobs;
    std::cout << DumpJson(out) << "\n";
  } else {
    std::cout << "\n";
  }
}

}  // namespace

void AddDtypeOption(CLI::App& cmd, std::string& dtype) {
  cmd.add_option("--dtype", dtype,
                 "Matrix dtype on the cpu: auto (the checkpoint's), f32, bf16 or f16 (converted "
                 "at load)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}));
}

void AddGenerateCommand(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from one prompt with one engine");
  cmd->add_option("--model", f->model_dir, "Model directory (default: the built-in tiny model)");
  cmd->add_option("--prompt", f->prompt, "Prompt text")->required();
  cmd->add_flag("--chat", f->chat,
                "Wrap the prompt as a user message in the model's chat template");
  cmd->add_option("--max-tokens", f->max_tokens, "Tokens to generate at most")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", f->temperature, "0 (default) is greedy");
  cmd->add_option("--top-p", f->top_p, "Nucleus sampling threshold");
  cmd->add_option("--top-k", f->top_k, "Keep the k most likely tokens (0: all)");
  cmd->add_option("--seed", f->seed, "Random seed for sampling");
  cmd->add_option("--stop", f->stop, "Stop string (repeatable)");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Keep generating past end-of-sequence tokens");
  cmd->add_option("--threads", f->threads, "CPU threads (0: all)");
  cmd->add_option("--device", f->device, "cpu, or cuda:N for GPU N (builds with CUDA)");
  AddDtypeOption(*cmd, f->dtype);
  cmd->add_flag("--json", f->json, "Print one JSON object with the token ids and text");
  cmd->add_option("--logprobs", f->logprobs,
                  "With --json: each token's log-probability and this many of the most likely "
                  "tokens' (0-20; the model's distribution, before temperature)")
      ->check(CLI::Range(0, 20));
  cmd->add_option("--json-schema", f->json_schema_file,
                  "Constrain the output to a JSON Schema file's values (\"object\": any JSON "
                  "object), as response_format does");
  cmd->callback([f] { Run(*f); });
}

}  // namespace pdserve::app
