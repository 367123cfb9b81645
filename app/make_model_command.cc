// `pdserve make-model`: writes a model directory with random weights (see model/model_maker.h).
#include <iostream>

#include "app/commands.h"
#include "model/model_maker.h"

namespace pdserve::app {

void AddMakeModelCommand(CLI::App& app) {
  auto options = std::make_shared<model::MakeModelOptions>();
  auto dtype = std::make_shared<std::string>("f32");
  CLI::App* cmd = app.add_subcommand("make-model", "Write a model directory with random weights");
  cmd->add_option("--preset", options->preset,
                  "tiny (~1M parameters), small (~100M), llama3-8b (Llama-3-8B's shape, 16 GB "
                  "in bf16: minutes to write), qwen3-tiny (a Qwen3 dense model as small as "
                  "tiny) or qwen3-0.6b (Qwen3-0.6B's shape, 1.2 GB in bf16)")
      ->check(CLI::IsMember(model::PresetNames()));
  cmd->add_option("--out", options->out_dir, "Directory to write")->required();
  cmd->add_option("--seed", options->seed, "Random seed; the same seed writes the same model");
  cmd->add_option("--dtype", *dtype, "Weight dtype: f32, bf16 or f16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  cmd->add_option("--shards", options->shards, "Split weights into this many safetensors files")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--architecture", options->architecture,
                  "The preset's by default; or LlamaForCausalLM, MistralForCausalLM, "
                  "Qwen2ForCausalLM or Qwen3ForCausalLM on the preset's shape")
      ->check(CLI::IsMember(
          {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}));
  cmd->add_option("--tokenizer", options->tokenizer_dir,
                  "A real model's directory: copy its tokenizer.json, tokenizer_config.json and "
                  "chat_template.jinja instead of writing a byte-level tokenizer; the vocabulary "
                  "sets the embedding's rows")
      ->check(CLI::ExistingDirectory);
  cmd->callback([options, dtype] {
    options->dtype = *model::ParseDType(*dtype);
    ExitOnError("make-model", model::MakeModel(*options));
    std::cout << "wrote " << options->preset << " model to " << options->out_dir << "\n";
  });
}

}  // namespace pdserve::app
