#include "kareus/profile/group.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstdlib>

#include "kareus/core/error.hpp"

namespace kareus::profile {

void LocalGroup::abort(int exit_code) { std::_Exit(exit_code); }

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

GroupPlace group_place(int world_rank, int world, int tp, int cp, workload::ParallelGroup group) {
  if (tp < 1 || cp < 1 || world < 1 || world % (tp * cp) != 0) {
    throw InputError({"", 0, 0, "ranks"},
                     fmt::format("{} ranks do not hold whole TP {} x CP {} groups; run a multiple "
                                 "of {} (mpirun -np {})",
                                 world, tp, cp, tp * cp, tp * cp));
  }
  KAREUS_CHECK(world_rank >= 0 && world_rank < world, "rank outside the world");
  const int block = world_rank / (tp * cp), inner = world_rank % (tp * cp);
  if (group == workload::ParallelGroup::kTensor) return {world_rank / tp, world_rank % tp};
  return {block * tp + inner % tp, inner / tp};
}

CollectiveGroups::CollectiveGroups(Group& world, const workload::ParallelConfig& parallel) {
  if (world.size() == 1) {
    tp_ = std::make_unique<LocalGroup>();
    cp_ = std::make_unique<LocalGroup>();
    return;
  }
  GroupPlace tp = group_place(world.rank(), world.size(), parallel.tp, parallel.cp,
                              workload::ParallelGroup::kTensor);
  GroupPlace cp = group_place(world.rank(), world.size(), parallel.tp, parallel.cp,
                              workload::ParallelGroup::kContext);
  tp_ = world.split(tp.color, tp.key);
  cp_ = world.split(cp.color, cp.key);
}

Group& CollectiveGroups::of(workload::ParallelGroup group) const {
  return group == workload::ParallelGroup::kTensor ? *tp_ : *cp_;
}

bool every_member_agrees(Group& group, const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  const auto [low, high] = group.min_max(std::bit_cast<std::int64_t>(h));
  return low == high;
}

}  // namespace kareus::profile
