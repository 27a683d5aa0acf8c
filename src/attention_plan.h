// src/attention_plan.h: what the attention front ends (forward and backward) share: the validated
// inputs turned into a device plan, with every buffer the plan points into (positions, rotated
// q/k, bias lookup, Shaw tables, Transformer-XL projections). Not movable: the plan points into it.
#pragma once
#include <memory>
#include <vector>

#include "posenc/attention.h"
#include "src/cpu/attention.h"

namespace posenc::detail {

class AttentionSetup {
 public:
  AttentionSetup(const AttentionConfig& config, const AttentionInputs& in);
  AttentionSetup(const AttentionSetup&) = delete;
  AttentionSetup& operator=(const AttentionSetup&) = delete;

  cpu::AttnPlan plan;
  const AttentionConfig& config;
  std::vector<int64_t> q_pos, k_pos;  // (B, Q), (B, K)
  // Transformer-XL: the sinusoids R (n, d_model) of the distinct deltas, for d W_R.
  std::vector<double> xl_sinusoids;

 private:
  void set_inputs(const AttentionInputs& in);
  void set_bias();
  void set_shaw();
  void set_transformer_xl();

  std::vector<float> q_buf_, k_buf_;  // rotated (and + u) copies when needed
  cpu::DistanceBias bias_;
  std::vector<double> slopes_;
  cpu::ShawTerms shaw_;
  std::vector<float> shaw_tables_;  // a_k, a_k^T, a_v, a_v^T
  cpu::XLTerms xl_;
  std::unique_ptr<cpu::DeltaIndex> xl_delta_;
  std::vector<float> xl_qv_, xl_rproj_, xl_rproj_t_;
};

}  // namespace posenc::detail
