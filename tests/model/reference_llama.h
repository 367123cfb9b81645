// Test helper: a direct transcription of the Llama maths (and Qwen's biases, q/k norms and tied
// embeddings, Llama-3's RoPE scaling) in double precision, sharing no code with the engine: the
// reference the CPU backend's logits and the engine's logprobs are held against.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace pdserve::model::testing {

struct RefModel {
  ModelConfig c;
  std::map<std::string, std::vector<double>> t;

  const std::vector<double>& W(const std::string& name) const { return t.at(name); }
};

inline RefModel LoadRef(const ModelConfig& c, const std::string& dir) {
  RefModel m{c, {}};
  auto file = SafetensorsFile::Open(dir + "/model.safetensors");
  EXPECT_TRUE(file.ok());
  for (const auto& [name, view] : (*file)->tensors()) {
    std::vector<float> f(view.numel());
    ConvertToFloat(view.dtype, view.data, f.data(), f.size());
    m.t[name] = std::vector<double>(f.begin(), f.end());
  }
  if (c.tie_word_embeddings) m.t["lm_head.weight"] = m.t["model.embed_tokens.weight"];
  return m;
}

inline std::vector<double> Linear(const std::vector<double>& w, const std::vector<double>& x,
                                  int out) {
  const int in = static_cast<int>(x.size());
  std::vector<double> y(out, 0.0);
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i) y[o] += w[static_cast<size_t>(o) * in + i] * x[i];
  return y;
}

inline std::vector<double> Norm(const std::vector<double>& x, const std::vector<double>& w,
                                double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

// Each of `heads` heads of v, [head_dim] values apiece, RMS-normalised with the weights w.
inline void NormHeads(std::vector<double>& v, int heads, const std::vector<double>& w,
                      const ModelConfig& c) {
  for (int h = 0; h < heads; ++h) {
    const auto first = v.begin() + static_cast<size_t>(h) * c.head_dim;
    const auto normed = Norm(std::vector<double>(first, first + c.head_dim), w, c.rms_norm_eps);
    std::copy(normed.begin(), normed.end(), first);
  }
}

inline double InvFreq(const ModelConfig& c, int i) {
  double f = 1.0 / std::pow(c.rope_theta, 2.0 * i / c.head_dim);
  if (!c.rope_scaling) return f;
  const auto& s = *c.rope_scaling;
  const double wavelen = 2 * M_PI / f;
  const double lo = s.original_max_position_embeddings / s.low_freq_factor;
  const double hi = s.original_max_position_embeddings / s.high_freq_factor;
  if (wavelen < hi) return f;
  if (wavelen > lo) return f / s.factor;
  const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * f / s.factor + smooth * f;
}

inline void Rope(std::vector<double>& v, int heads, const ModelConfig& c, int pos) {
  const int half = c.head_dim / 2;
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < half; ++i) {
      const double a = v[h * c.head_dim + i], b = v[h * c.head_dim + i + half];
      const double th = pos * InvFreq(c, i);
      v[h * c.head_dim + i] = a * std::cos(th) - b * std::sin(th);
      v[h * c.head_dim + i + half] = b * std::cos(th) + a * std::sin(th);
    }
  }
}

// Logits for every position of `tokens`, [n][vocab].
inline std::vector<std::vector<double>> RefForward(const RefModel& m,
                                                   const std::vector<int32_t>& tokens) {
  const ModelConfig& c = m.c;
  const int n = static_cast<int>(tokens.size());
  std::vector<std::vector<double>> x(n);
  for (int i = 0; i < n; ++i) {
    const auto& e = m.W("model.embed_tokens.weight");
    x[i].assign(e.begin() + static_cast<size_t>(tokens[i]) * c.dim,
                e.begin() + static_cast<size_t>(tokens[i] + 1) * c.dim);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int i = 0; i < n; ++i) {
      auto xn = Norm(x[i], m.W(p + "input_layernorm.weight"), c.rms_norm_eps);
      q[i] = Linear(m.W(p + "self_attn.q_proj.weight"), xn, c.q_dim());
      k[i] = Linear(m.W(p + "self_attn.k_proj.weight"), xn, c.kv_dim());
      v[i] = Linear(m.W(p + "self_attn.v_proj.weight"), xn, c.kv_dim());
      if (c.attention_bias) {
        for (int j = 0; j < c.q_dim(); ++j) q[i][j] += m.W(p + "self_attn.q_proj.bias")[j];
        for (int j = 0; j < c.kv_dim(); ++j) k[i][j] += m.W(p + "self_attn.k_proj.bias")[j];
        for (int j = 0; j < c.kv_dim(); ++j) v[i][j] += m.W(p + "self_attn.v_proj.bias")[j];
      }
      if (c.qk_norm) {  // Qwen3: each head through its own RMSNorm, after the bias
        NormHeads(q[i], c.n_heads, m.W(p + "self_attn.q_norm.weight"), c);
        NormHeads(k[i], c.n_kv_heads, m.W(p + "self_attn.k_norm.weight"), c);
      }
      Rope(q[i], c.n_heads, c, i);
      Rope(k[i], c.n_kv_heads, c, i);
    }
    for (int i = 0; i < n; ++i) {
      std::vector<double> att(c.q_dim(), 0.0);
      for (int h = 0; h < c.n_heads; ++h) {
        const int g = h / (c.n_heads / c.n_kv_heads);
        std::vector<double> s(i + 1);
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          double d = 0;
          for (int e = 0; e < c.head_dim; ++e)
            d += q[i][h * c.head_dim + e] * k[j][g * c.head_dim + e];
          s[j] = d / std::sqrt(static_cast<double>(c.head_dim));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& sj : s) sum += (sj = std::exp(sj - mx));
        for (int j = 0; j <= i; ++j)
          for (int e = 0; e < c.head_dim; ++e)
            att[h * c.head_dim + e] += s[j] / sum * v[j][g * c.head_dim + e];
      }
      auto o = Linear(m.W(p + "self_attn.o_proj.weight"), att, c.dim);
      for (int d = 0; d < c.dim; ++d) x[i][d] += o[d];
    }
    for (int i = 0; i < n; ++i) {
      auto xn = Norm(x[i], m.W(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
      auto g = Linear(m.W(p + "mlp.gate_proj.weight"), xn, c.hidden_dim);
      auto u = Linear(m.W(p + "mlp.up_proj.weight"), xn, c.hidden_dim);
      for (int j = 0; j < c.hidden_dim; ++j) g[j] = g[j] / (1 + std::exp(-g[j])) * u[j];
      auto d = Linear(m.W(p + "mlp.down_proj.weight"), g, c.dim);
      for (int j = 0; j < c.dim; ++j) x[i][j] += d[j];
    }
  }
  std::vector<std::vector<double>> logits(n);
  for (int i = 0; i < n; ++i) {
    logits[i] = Linear(m.W("lm_head.weight"), Norm(x[i], m.W("model.norm.weight"), c.rms_norm_eps),
                       c.vocab_size);
  }
  return logits;
}

}  // namespace pdserve::model::testing
