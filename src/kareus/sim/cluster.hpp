// The machines a pipeline runs on, as the event simulator needs them: how many GPUs share a node,
// the links between stages inside a node and across nodes, and how long a clock change takes to
// reach the GPU. Presets are data files, data/clusters/<name>.json.
//
// Thread-safety: plain values; the loader reads a file and shares nothing.
// Example:
//   ClusterSpec dgx = load_cluster_preset("dgx-a100");
//   Link l = dgx.link_between(0, 1, /*gpus_per_stage=*/8);   // inter-node with TP 8
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::sim {

struct Link {
  double bandwidth_bps = 0;  // bytes/s, one direction
  double latency_s = 0;      // per transfer
  double transfer_s(double bytes) const { return bytes > 0 ? latency_s + bytes / bandwidth_bps : 0; }
  bool operator==(const Link&) const = default;
};

struct ClusterSpec {
  std::string name;
  std::string display_name;
  std::string source;  // where the numbers come from
  int gpus_per_node = 8;
  Link intra_node;
  Link inter_node;
  double clock_switch_latency_s = 0;  // from a clock request to the new clock in effect

  // The link between pipeline stages `a` and `b` when each stage holds `gpus_per_stage` GPUs
  // (TP × CP) numbered stage-major from the first node: intra-node when both lie on one node.
  Link link_between(int a, int b, int gpus_per_stage) const;
  bool operator==(const ClusterSpec&) const = default;
};

// Names of the bundled presets (data_dir()/clusters/*.json), sorted.
std::vector<std::string> cluster_names();

// A preset by name, or a file when `name_or_path` ends in .json. InputError naming the file and
// field on a missing or malformed one, or the known names on an unknown name.
ClusterSpec load_cluster_preset(std::string_view name_or_path);

}  // namespace kareus::sim
