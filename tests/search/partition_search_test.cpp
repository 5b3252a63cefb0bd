// The knob grid's clocks (search/partition_search.hpp): the range snapped to the GPU's clocks, and
// a step too small to reach HI is bad input instead of a loop that never ends (a fuzz finding:
// `--clocks 900:1410:1e-300`, where LO + STEP == LO).
#include "kareus/search/partition_search.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kareus/core/error.hpp"
#include "kareus/hardware/gpu.hpp"

namespace kareus::search {
namespace {

GridOptions grid(double lo, double hi, double step) {
  GridOptions g;
  g.min_clock_mhz = lo;
  g.max_clock_mhz = hi;
  g.clock_step_mhz = step;
  return g;
}

TEST(GridClocks, SnapsTheRangeToTheGpusClocks) {
  const hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  EXPECT_EQ(grid_clocks_mhz(gpu, grid(900, 1410, 30)).size(), 18u);
  EXPECT_THAT(grid_clocks_mhz(gpu, grid(1400, 1410, 1)), ::testing::ElementsAre(1395, 1410));
}

TEST(GridClocks, AStepTooSmallToReachTheEndIsBadInput) {
  const hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  EXPECT_THROW(grid_clocks_mhz(gpu, grid(900, 1410, 1e-300)), InputError);
  EXPECT_THROW(grid_clocks_mhz(gpu, grid(900, 900, 1e-300)), InputError);
  EXPECT_THROW(grid_clocks_mhz(gpu, grid(900, 1410, 0)), InputError);
}

}  // namespace
}  // namespace kareus::search
