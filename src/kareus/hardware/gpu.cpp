#include "kareus/hardware/gpu.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kareus/core/error.hpp"

namespace kareus::hardware {
namespace {

constexpr double kClockTolMhz = 1e-6;
// Fractions may carry rounding from the caller's arithmetic.
constexpr double kFractionTol = 1e-9;

void check_clock(const GpuSpec& gpu, double freq_mhz) {
  KAREUS_CHECK(
      std::isfinite(freq_mhz) && freq_mhz > 0 && freq_mhz <= gpu.max_clock_mhz * (1 + kFractionTol),
      fmt::format("{}: clock {} MHz outside (0, {}] MHz", gpu.name, freq_mhz, gpu.max_clock_mhz));
}

bool is_fraction(double x) {
  return std::isfinite(x) && x >= -kFractionTol && x <= 1 + kFractionTol;
}

}  // namespace

bool GpuSpec::supports_clock(double freq_mhz) const {
  auto it = std::lower_bound(sm_clocks_mhz.begin(), sm_clocks_mhz.end(), freq_mhz - kClockTolMhz);
  return it != sm_clocks_mhz.end() && std::abs(*it - freq_mhz) <= kClockTolMhz;
}

double GpuSpec::nearest_clock_mhz(double freq_mhz) const {
  KAREUS_CHECK(!sm_clocks_mhz.empty(), name + " has no clocks");
  auto it = std::lower_bound(sm_clocks_mhz.begin(), sm_clocks_mhz.end(), freq_mhz);
  if (it == sm_clocks_mhz.end()) return sm_clocks_mhz.back();
  if (it == sm_clocks_mhz.begin()) return *it;
  double above = *it, below = *(it - 1);
  return (above - freq_mhz < freq_mhz - below) ? above : below;
}

double peak_flops_at(const GpuSpec& gpu, double freq_mhz) {
  check_clock(gpu, freq_mhz);
  return gpu.peak_bf16_flops * freq_mhz / gpu.max_clock_mhz;
}

double voltage_v(const GpuSpec& gpu, double freq_mhz) {
  check_clock(gpu, freq_mhz);
  const PowerModel& p = gpu.power;
  if (freq_mhz <= p.knee_clock_mhz || gpu.max_clock_mhz <= p.knee_clock_mhz) return p.v_min_v;
  double along = (freq_mhz - p.knee_clock_mhz) / (gpu.max_clock_mhz - p.knee_clock_mhz);
  return p.v_min_v + (p.v_max_v - p.v_min_v) * along;
}

double dynamic_power_w(const GpuSpec& gpu, double freq_mhz, const Activity& a) {
  KAREUS_CHECK(is_fraction(a.compute_sm_fraction) && is_fraction(a.comm_sm_fraction) &&
                   is_fraction(a.compute_intensity) &&
                   a.compute_sm_fraction + a.comm_sm_fraction <= 1 + kFractionTol,
               fmt::format("activity out of range: compute {} (intensity {}), comm {}",
                           a.compute_sm_fraction, a.compute_intensity, a.comm_sm_fraction));
  KAREUS_CHECK(std::isfinite(a.hbm_bytes_per_s) && a.hbm_bytes_per_s >= 0 &&
                   std::isfinite(a.link_bytes_per_s) && a.link_bytes_per_s >= 0,
               fmt::format("traffic out of range: HBM {} B/s, link {} B/s", a.hbm_bytes_per_s,
                           a.link_bytes_per_s));
  const PowerModel& p = gpu.power;
  const double v = voltage_v(gpu, freq_mhz);
  const double capacitance_nf =
      (a.compute_sm_fraction + a.comm_sm_fraction) * p.idle_sm_capacitance_nf +
      a.compute_sm_fraction * a.compute_intensity * p.compute_capacitance_nf +
      a.comm_sm_fraction * p.copy_capacitance_nf;
  const double sm_w = capacitance_nf * v * v * freq_mhz * 1e-3;  // nF · V² · MHz = mW
  const double memory_w = a.hbm_bytes_per_s * p.hbm_pj_per_byte * 1e-12;
  const double link_w = a.link_bytes_per_s * p.nvlink_pj_per_byte * 1e-12;
  return sm_w + memory_w + link_w;
}

double power_w(const GpuSpec& gpu, double freq_mhz, const Activity& activity) {
  return gpu.static_power_w + dynamic_power_w(gpu, freq_mhz, activity);
}

Activity full_load_activity(const GpuSpec& gpu) {
  return Activity{.compute_sm_fraction = 1,
                  .compute_intensity = 1,
                  .comm_sm_fraction = 0,
                  .hbm_bytes_per_s = gpu.hbm_bandwidth_bps,
                  .link_bytes_per_s = 0};
}

}  // namespace kareus::hardware
