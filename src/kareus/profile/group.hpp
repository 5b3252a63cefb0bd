// The ranks of a profiling run and how they talk: one process per GPU, rank 0 runs the search and
// tells the others which knob to measure. A Group is that control channel (broadcast, gather,
// barrier, min/max reduction) plus split(), which carves the TP and CP groups a partition's
// collective runs in. LocalGroup is the one-process run; open_world_group() gives the MPI world
// when the process was started by mpirun (and the build has MPI), else a LocalGroup.
//
// Every member of a group must make the same calls in the same order (as with MPI).
//
// Thread-safety: one thread per process uses a group.
// Example:
//   std::unique_ptr<Group> world = open_world_group();
//   std::string command = world->rank() == 0 ? "measure fwd_mlp" : "";
//   world->broadcast(command);                            // every rank now holds rank 0's text
//   std::vector<double> all = world->gather({time_s});    // rank order, at rank 0 only
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kareus/workload/ops.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::profile {

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every member's `data` becomes the first member's (rank 0 of this group).
  virtual void broadcast(std::string& data) = 0;
  // Every member's `values` (the same length everywhere), concatenated in rank order, at rank 0;
  // empty on the other members.
  virtual std::vector<double> gather(const std::vector<double>& values) = 0;
  // The smallest and largest `value` over the members, at every member.
  virtual std::pair<std::int64_t, std::int64_t> min_max(std::int64_t value) = 0;
  virtual void barrier() = 0;
  // The members with the same `color`, ordered by `key`, as a group of their own.
  virtual std::unique_ptr<Group> split(int color, int key) = 0;
  // Ends the whole run at once from any member (MPI_Abort), for a failure the others cannot learn
  // of because they wait in a collective call.
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// One process alone.
class LocalGroup final : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void broadcast(std::string&) override {}
  std::vector<double> gather(const std::vector<double>& values) override { return values; }
  std::pair<std::int64_t, std::int64_t> min_max(std::int64_t value) override { return {value, value}; }
  void barrier() override {}
  std::unique_ptr<Group> split(int, int) override { return std::make_unique<LocalGroup>(); }
  [[noreturn]] void abort(int exit_code) override;
};

// Whether the process was started by an MPI launcher (Open MPI's mpirun, or a PMI/PMIx one).
bool launched_by_mpi();
// Whether this build can talk MPI.
bool built_with_mpi();
// The MPI world when launched by mpirun (MPI is initialised here and finalised when the group is
// destroyed), else a LocalGroup. Throws InputError when launched by mpirun in a build without MPI.
std::unique_ptr<Group> open_world_group();

// Whether every member of `group` holds the same `text` (a collective call: every member makes it),
// by the smallest and largest FNV-1a fingerprint over the members.
bool every_member_agrees(Group& group, const std::string& text);

// Where a world rank sits among the TP and CP groups, as Megatron lays them out (the artifact's
// layout): TP innermost (ranks tp·i .. tp·i+tp-1), CP across them (ranks that share a TP index in a
// block of tp·cp), blocks of tp·cp side by side when the world is larger (8 GPUs with TP 4, CP 2:
// TP groups {0-3}, {4-7} and CP groups {0,4}, {1,5}, {2,6}, {3,7}). `color` names the group, `key`
// the rank's place in it.
struct GroupPlace {
  int color = 0;
  int key = 0;
  bool operator==(const GroupPlace&) const = default;
};
// Throws InputError when `world` is not a multiple of tp·cp.
GroupPlace group_place(int world_rank, int world, int tp, int cp, workload::ParallelGroup group);

// The TP and CP groups of this rank, split once from the world: what a partition's collective
// runs in.
class CollectiveGroups {
 public:
  // Collective call on every rank of `world`. With one rank, both are that rank alone (a single
  // GPU stands in for its group). Throws InputError when the world is neither 1 rank nor a
  // multiple of tp·cp (naming the counts and the mpirun -np that fits).
  CollectiveGroups(Group& world, const workload::ParallelConfig& parallel);
  Group& of(workload::ParallelGroup group) const;

 private:
  std::unique_ptr<Group> tp_, cp_;
};

}  // namespace kareus::profile
