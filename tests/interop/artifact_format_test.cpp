// The artifact's names and config strings: the slot alias table both ways, and config strings of
// both forms through format and parse, checked against the artifact's parser's reading of them
// (the trailing two integers are SMs and block, the rest start-end split at the first '-').
#include "kareus/interop/artifact_format.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace kareus::interop {
namespace {

TEST(ArtifactSlots, ActivationIsTheOnlyFamilyNamedDifferently) {
  EXPECT_EQ(to_artifact_slot("act_0"), "activation_0");
  EXPECT_EQ(to_artifact_slot("act_12"), "activation_12");
  EXPECT_EQ(from_artifact_slot("activation_0"), "act_0");
  for (const char* same : {"norm_0", "rope_1", "linear_2", "attn_0", "none"}) {
    EXPECT_EQ(to_artifact_slot(same), same);
    EXPECT_EQ(from_artifact_slot(same), same);
  }
  EXPECT_EQ(to_artifact_slot("activation_0"), "activation_0");  // already theirs: unchanged
  EXPECT_EQ(from_artifact_slot("act_0"), "act_0");
}

RC_GTEST_PROP(ArtifactSlots, TheAliasTableRoundTrips, ()) {
  const auto family = *rc::gen::element<std::string>("norm", "rope", "act", "linear", "attn");
  const auto index = *rc::gen::inRange(0, 40);
  const std::string ours = family + "_" + std::to_string(index);
  RC_ASSERT(from_artifact_slot(to_artifact_slot(ours)) == ours);
}

TEST(ArtifactConfig, ParsesBothFormsAsTheArtifactDoes) {
  EXPECT_EQ(parse_artifact_config("linear_0-none-12-1024"),
            (ArtifactCommConfig{"linear_0", "none", 12, 1024, false}));
  EXPECT_EQ(parse_artifact_config("none-none-16-1024"), (ArtifactCommConfig{"none", "none", 16, 1024, false}));
  EXPECT_EQ(parse_artifact_config("0-8-16-1024"), (ArtifactCommConfig{"0", "8", 16, 1024, true}));
  EXPECT_EQ(parse_artifact_config("-1--1-16-1024"), (ArtifactCommConfig{"-1", "-1", 16, 1024, true}));
  for (const char* bad : {"", "linear_0", "linear_0-none", "linear_0-none-12", "linear_0-none-x-1024",
                          "-none-12-1024", "linear_0--12-1024", "linear_0-none-12-"}) {
    EXPECT_FALSE(parse_artifact_config(bad).has_value()) << bad;
  }
}

RC_GTEST_PROP(ArtifactConfig, FormatThenParseIsTheIdentity, ()) {
  const auto start = *rc::gen::element<std::string>("norm_0", "linear_1", "activation_0", "attn_0", "none");
  const auto sms = *rc::gen::inRange(1, 132);
  const auto block = *rc::gen::element(256, 512, 1024);
  const ArtifactCommConfig config{start, "none", sms, block, false};
  RC_ASSERT(parse_artifact_config(format_artifact_config(config)) == config);
}

TEST(ArtifactFields, TupleOrderOfTheArtifactsScheduleItems) {
  auto joined = [](std::span<const std::string_view> fields) {
    std::string out;
    for (auto f : fields) out += std::string(out.empty() ? "" : " ") + std::string(f);
    return out;
  };
  EXPECT_EQ(joined(artifact_forward_fields(false)), "fwd_attn fwd_mlp");
  EXPECT_EQ(joined(artifact_backward_fields(false)), "bwd_attn bwd_mlp");
  EXPECT_EQ(joined(artifact_forward_fields(true)), "fwd_qkv_ar fwd_qkv_ag fwd_ao_ag fwd_ao_ar fwd_mlp");
  EXPECT_EQ(joined(artifact_backward_fields(true)), "bwd_qkv_ar bwd_qkv_rs bwd_a_rs bwd_a_ag bwd_o_ag bwd_o_ar bwd_mlp");
}

TEST(ArtifactFields, ProfileColumnsNameTheirPartitions) {
  EXPECT_EQ(artifact_profile_field("attention_configs", false), "fwd_attn");
  EXPECT_EQ(artifact_profile_field("attention_configs", true), "bwd_attn");
  EXPECT_EQ(artifact_profile_field("mlp_configs", true), "bwd_mlp");
  EXPECT_EQ(artifact_profile_field("recompute_mlp_configs", true), "fwd_mlp");
  EXPECT_EQ(artifact_profile_field("bwd_qkv_rs", true), "bwd_qkv_rs");
  EXPECT_FALSE(artifact_profile_field("note", false).has_value());
  EXPECT_FALSE(artifact_profile_field("energy", true).has_value());
}

}  // namespace
}  // namespace kareus::interop
