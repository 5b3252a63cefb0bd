// Launch-slot names, ours against the Kareus artifact's, for the default TP job (Llama 3.2 3B,
// TP 8) and a CP job (TP 4, CP 2): the artifact's records and schedules name a slot by its own
// rule, so a knob read from its logs, or written for its scheduler, lands on the same launch
// point only if both sides name it alike.
//
// The artifact names the slots of a partition's compute ops as `<group>_<n>`, counting per group,
// where an op's group comes from its class (norm: residual fork, bias-dropout-add, RMSNorm;
// rope: QKV post-processing, rotary embedding; activation: SwiGLU; linear; attn) and only
// consecutive ops of the same memory-bound group (norm, rope, activation) share a slot. Ours
// (workload::launch_slots) follows the same rule, so the names differ only by the family alias of
// interop/artifact_format (act → activation), on these jobs' partitions and wherever different
// memory-bound groups meet.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "kareus/interop/artifact_format.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus {
namespace {

using Slots = std::vector<std::string>;

std::vector<workload::Partition> partitions_of(int tp, int cp) {
  const workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  workload::ParallelConfig p;
  p.tp = tp;
  p.cp = cp;
  return workload::build_partitions(model, workload::validated(model, p));
}

// The artifact's rule, written from its description above, over our ops' kinds.
Slots artifact_rule(const workload::Partition& partition) {
  auto group = [](workload::OpKind kind) -> std::string {
    switch (kind) {
      case workload::OpKind::kGemm: return "linear";
      case workload::OpKind::kAttention: return "attn";
      case workload::OpKind::kNorm: return "norm";
      case workload::OpKind::kRope: return "rope";
      case workload::OpKind::kActivation: return "activation";
      case workload::OpKind::kElementwise: return "elementwise";
    }
    return "?";
  };
  Slots out;
  std::map<std::string, int> counter;
  std::string previous;  // the memory-bound group of the op before, if it was one
  for (const workload::ComputeOp& op : partition.ops) {
    const std::string g = group(op.kind);
    const bool memory = g == "norm" || g == "rope" || g == "activation";
    if (memory && g == previous) continue;
    previous = memory ? g : "";
    out.push_back(g + "_" + std::to_string(counter[g]++));
  }
  return out;
}

void expect_slots(const std::vector<workload::Partition>& partitions, const std::map<std::string, std::pair<Slots, Slots>>& expected) {
  std::map<std::string, bool> seen;
  for (const workload::Partition& p : partitions) {
    ASSERT_TRUE(expected.contains(p.key)) << p.key << " is not pinned";
    const auto& [ours, theirs] = expected.at(p.key);
    Slots names;
    for (const auto& s : p.slots) names.push_back(s.name);
    EXPECT_EQ(names, ours) << p.key;
    Slots renamed;
    for (const auto& name : names) renamed.push_back(interop::to_artifact_slot(name));
    EXPECT_EQ(renamed, theirs) << p.key;
    for (const auto& name : theirs) EXPECT_EQ(interop::to_artifact_slot(interop::from_artifact_slot(name)), name) << p.key;
    for (std::size_t i = 0; i < names.size() && i < theirs.size(); ++i) EXPECT_EQ(interop::from_artifact_slot(theirs[i]), names[i]);
    // The artifact's own rule over our op list gives its names.
    EXPECT_EQ(artifact_rule(p), theirs) << p.key;
    seen[p.key] = true;
  }
  EXPECT_EQ(seen.size(), expected.size());
}

// Each partition's slots in our names and in the artifact's (from the compute ops its profiling
// harness builds for that key, tests/bayesian/partitions/<key>/ in ml-energy/kareus; a backward
// partition runs its ops in reverse).
TEST(ArtifactSlots, TheDefaultTensorParallelJob) {
  expect_slots(partitions_of(8, 1),
               {
                   {"fwd_attn", {{"norm_0", "linear_0", "rope_0", "attn_0", "linear_1"},
                                 {"norm_0", "linear_0", "rope_0", "attn_0", "linear_1"}}},
                   {"fwd_mlp", {{"norm_0", "linear_0", "act_0", "linear_1"}, {"norm_0", "linear_0", "activation_0", "linear_1"}}},
                   {"bwd_mlp", {{"norm_0", "linear_0", "act_0", "linear_1"}, {"norm_0", "linear_0", "activation_0", "linear_1"}}},
                   {"bwd_attn", {{"norm_0", "linear_0", "attn_0", "rope_0", "linear_1"},
                                 {"norm_0", "linear_0", "attn_0", "rope_0", "linear_1"}}},
               });
}

TEST(ArtifactSlots, AContextParallelJob) {
  const std::pair<Slots, Slots> qkv_fwd{{"norm_0", "linear_0", "rope_0"}, {"norm_0", "linear_0", "rope_0"}};
  const std::pair<Slots, Slots> ao_fwd{{"attn_0", "linear_0"}, {"attn_0", "linear_0"}};
  const std::pair<Slots, Slots> mlp{{"norm_0", "linear_0", "act_0", "linear_1"}, {"norm_0", "linear_0", "activation_0", "linear_1"}};
  const std::pair<Slots, Slots> o_bwd{{"norm_0", "linear_0"}, {"norm_0", "linear_0"}};
  const std::pair<Slots, Slots> a_bwd{{"attn_0"}, {"attn_0"}};
  const std::pair<Slots, Slots> qkv_bwd{{"rope_0", "linear_0"}, {"rope_0", "linear_0"}};
  expect_slots(partitions_of(4, 2), {
                                        {"fwd_qkv_ar", qkv_fwd},
                                        {"fwd_qkv_ag", qkv_fwd},
                                        {"fwd_ao_ag", ao_fwd},
                                        {"fwd_ao_ar", ao_fwd},
                                        {"fwd_mlp", mlp},
                                        {"bwd_mlp", mlp},
                                        {"bwd_o_ar", o_bwd},
                                        {"bwd_o_ag", o_bwd},
                                        {"bwd_a_ag", a_bwd},
                                        {"bwd_a_rs", a_bwd},
                                        {"bwd_qkv_rs", qkv_bwd},
                                        {"bwd_qkv_ar", qkv_bwd},
                                    });
}

TEST(ArtifactSlots, TheRulesAgreeWhereDifferentMemoryBoundGroupsMeet) {
  // An activation straight before a norm is two slots on both sides (activation_0, norm_0).
  workload::Partition p;
  p.ops = {{"fc1", workload::OpKind::kGemm}, {"swiglu", workload::OpKind::kActivation},
           {"norm", workload::OpKind::kNorm}, {"fc2", workload::OpKind::kGemm}};
  Slots ours;
  for (const auto& s : workload::launch_slots(p.ops)) ours.push_back(interop::to_artifact_slot(s.name));
  EXPECT_EQ(ours, (Slots{"linear_0", "activation_0", "norm_0", "linear_1"}));
  EXPECT_EQ(artifact_rule(p), ours);
}

// Any sequence of op kinds: our slots, renamed, are the artifact rule's names, and every op lands
// in exactly one slot, in order.
TEST(ArtifactSlots, TheRulesAgreeOnRandomOpSequences) {
  const std::vector<workload::OpKind> kinds = {workload::OpKind::kGemm, workload::OpKind::kAttention,
                                               workload::OpKind::kNorm, workload::OpKind::kRope,
                                               workload::OpKind::kActivation};
  std::mt19937 rng(20261201);
  for (int trial = 0; trial < 2000; ++trial) {
    workload::Partition p;
    const int n = 1 + static_cast<int>(rng() % 9);
    for (int i = 0; i < n; ++i) p.ops.push_back({"op" + std::to_string(i), kinds[rng() % kinds.size()]});
    const std::vector<workload::LaunchSlot> slots = workload::launch_slots(p.ops);
    Slots ours;
    std::size_t next_op = 0;
    for (const auto& s : slots) {
      ours.push_back(interop::to_artifact_slot(s.name));
      EXPECT_EQ(s.first_op, next_op) << "trial " << trial;
      next_op += s.op_count;
    }
    EXPECT_EQ(next_op, p.ops.size()) << "trial " << trial;
    EXPECT_EQ(ours, artifact_rule(p)) << "trial " << trial << " (seed 20261201)";
  }
}

}  // namespace
}  // namespace kareus
