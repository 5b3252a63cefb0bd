// Whole-stage sweeps and P_static on a fake GPU. A stage's steps are checked against the option
// table the planner composes from per-partition points (compose, the real consumer of the same
// partitions); a sweep's figures against the model evaluated independently here; its CSV is read
// back with the pipeline's own Perseus reader; a rerun resumes from the journal.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "kareus/compose/compose.hpp"
#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/pipeline/option_table.hpp"
#include "kareus/profile/fake_executor.hpp"
#include "kareus/profile/measurer.hpp"
#include "kareus/profile/p_static.hpp"
#include "kareus/profile/session.hpp"
#include "kareus/profile/stage_sweep.hpp"
#include "kareus/workload/model.hpp"

namespace kareus::profile {
namespace {

using schedule::InstructionType;

struct Job {
  workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  workload::ParallelConfig parallel;
  std::vector<workload::Partition> partitions;
  Job(int tp, int pp, workload::Checkpointing checkpointing) {
    parallel.tp = tp;
    parallel.pp = pp;
    parallel.checkpointing = checkpointing;
    parallel = workload::validated(model, parallel);
    // What the planner's job_partitions holds: the layer partitions, then each stage's other work.
    partitions = workload::build_partitions(model, parallel);
    for (int stage = 0; stage < pp; ++stage) {
      for (auto& p : workload::non_partition_work(model, parallel, stage)) {
        bool known = false;
        for (const auto& q : partitions) known |= q.key == p.key;
        if (!known) partitions.push_back(std::move(p));
      }
    }
  }
};

struct Rig {
  hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  std::shared_ptr<runtime::ManualTimeSource> time = std::make_shared<runtime::ManualTimeSource>();
  std::shared_ptr<runtime::FakeGpu> device =
      std::make_shared<runtime::FakeGpu>(runtime::make_fake_gpu_config(gpu, 0, time));
  LocalGroup world;
  FakeExecutor executor{gpu, device, time, nullptr};
  runtime::FrequencyController controller{{device}, {.reset_on_signals = false}};
  runtime::EnergyMonitor monitor{{device}, {.time = time}};
  Measurer measurer{world, executor, controller, monitor,
                    MeasurementOptions{.warmup_s = 0.2, .window_s = 2, .cool_down_s = 0.1,
                                       .idle = [t = time](double s) { t->advance_s(s); }}};
};

// The model's time and energy of a stage instruction, summed over its steps at `mhz`.
std::pair<double, double> model_sum(const hardware::GpuSpec& gpu, const std::vector<Measurer::Step>& steps, double mhz) {
  const evaluate::SimulatedEvaluator sim(gpu);
  double t = 0, e = 0;
  for (const auto& s : steps) {
    workload::Knob knob = s.knob;
    knob.freq_mhz = mhz;
    const evaluate::EvalResult r = sim.evaluate(*s.partition, knob);
    t += static_cast<double>(s.count) * r.time_s;
    e += static_cast<double>(s.count) * r.energy_j;
  }
  return {t, e};
}

// With one (sequential) point per key, the composed option table has one option per clock: the
// sum the stage's steps must give.
TEST(StageSweep, StepsAreWhatTheOptionTableComposes) {
  const hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  const evaluate::SimulatedEvaluator sim(gpu);
  for (const auto checkpointing : {workload::Checkpointing::kFull, workload::Checkpointing::kNone}) {
    const Job job(2, 2, checkpointing);
    compose::PartitionPoints points;
    for (const auto& p : job.partitions) {
      const workload::Knob knob{1410, 8, std::string(workload::kSequentialSlot)};
      const evaluate::EvalResult r = sim.evaluate(p, knob);
      points[p.key].push_back({knob, r.time_s, r.energy_j});
    }
    const pipeline::OptionTable table = compose::compose_option_table(job.model, job.parallel, points, {});
    for (int stage = 0; stage < 2; ++stage) {
      for (const InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
        const auto steps = stage_steps(job.model, job.parallel, job.partitions, stage, type, 8);
        const auto [t, e] = model_sum(gpu, steps, 1410);
        const auto& options = table.at(stage, type);
        ASSERT_EQ(options.size(), 1u);
        EXPECT_NEAR(options[0].time_s, t, 1e-9 * t) << stage << " " << schedule::to_string(type);
        EXPECT_NEAR(options[0].energy_j, e, 1e-9 * e) << stage << " " << schedule::to_string(type);
      }
    }
    // Stage 0 runs the embedding, the last stage the loss: their instructions differ.
    EXPECT_NE(stage_steps(job.model, job.parallel, job.partitions, 0, InstructionType::kForward, 8).back().partition->key,
              stage_steps(job.model, job.parallel, job.partitions, 1, InstructionType::kForward, 8).back().partition->key);
  }
}

TEST(StageSweep, SweepMeasuresTheModelWritesPerseusAndResumes) {
  const Job job(2, 2, workload::Checkpointing::kFull);
  Rig rig;
  ProfileSession session(rig.world, job.partitions, rig.measurer, rig.gpu, "fake", nlohmann::json{{"job", 1}});
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "stage_sweep_test";
  std::filesystem::remove_all(dir);
  const StageSweepRequest request{{1110, 1410}, 8, dir, nlohmann::json{{"job", 1}}};
  const StageSweepOutcome first = run_stage_sweep(session, job.model, job.parallel, job.partitions, request);
  ASSERT_EQ(first.measurements.size(), 2u * 2u * 2u);
  EXPECT_EQ(first.measured_now, 8u);
  for (const auto& m : first.measurements) {
    const auto [t, e] =
        model_sum(rig.gpu, stage_steps(job.model, job.parallel, job.partitions, m.stage, m.type, 8), m.freq_mhz);
    EXPECT_NEAR(m.time_s, t, 1e-9 * t) << m.stage << " " << schedule::to_string(m.type) << " @" << m.freq_mhz;
    EXPECT_NEAR(m.energy_j, e, 1e-6 * e) << m.stage << " " << schedule::to_string(m.type) << " @" << m.freq_mhz;
  }
  // The pipeline's reader takes the file, and it holds what was measured.
  const pipeline::OptionTable table = pipeline::read_option_table(stage_profile_path(dir), 2);
  for (const auto& m : first.measurements) {
    bool found = false;
    for (const auto& o : table.at(m.stage, m.type)) {
      found |= o.freq_mhz == m.freq_mhz && std::abs(o.time_s - m.time_s) <= 1e-8 * m.time_s;
    }
    EXPECT_TRUE(found) << m.stage << " " << schedule::to_string(m.type) << " @" << m.freq_mhz;
  }
  // A rerun resumes: nothing measured again, the same figures.
  const long runs = rig.executor.runs();
  const StageSweepOutcome second = run_stage_sweep(session, job.model, job.parallel, job.partitions, request);
  EXPECT_EQ(second.measured_now, 0u);
  EXPECT_EQ(rig.executor.runs(), runs);
  ASSERT_EQ(second.measurements.size(), first.measurements.size());
  for (std::size_t i = 0; i < first.measurements.size(); ++i) {
    EXPECT_DOUBLE_EQ(second.measurements[i].time_s, first.measurements[i].time_s);
  }
  // A journal of another workload is refused before anything is measured or written.
  StageSweepRequest other = request;
  other.identity = nlohmann::json{{"job", 2}};
  EXPECT_THROW(run_stage_sweep(session, job.model, job.parallel, job.partitions, other), InputError);
  EXPECT_EQ(rig.executor.runs(), runs);
  std::filesystem::remove_all(dir);
}

TEST(PStatic, NeedsTwoRanks) {
  Rig rig;
  EXPECT_THROW(measure_p_static(rig.world, rig.executor, rig.controller, rig.monitor, {.clock_mhz = 1410}),
               InputError);
}

}  // namespace
}  // namespace kareus::profile
