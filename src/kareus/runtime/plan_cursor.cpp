#include "kareus/runtime/plan_cursor.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "kareus/core/error.hpp"
#include "kareus/core/pareto.hpp"
#include "kareus/plan/validate.hpp"

namespace kareus::runtime {

PlanCursor::StagePlan PlanCursor::load(const plan::Plan& plan, const std::string& source, DecodedKnobs& decoded) const {
  if (stage_ < 0 || stage_ >= static_cast<int>(plan.stages.size())) {
    throw InputError({source, 0, 0, "stages"},
                     fmt::format("stage {} is not in the plan, which has {} stage{}", stage_,
                                 plan.stages.size(), plan.stages.size() == 1 ? "" : "s"));
  }
  StagePlan loaded;
  // This rank's stage only: it runs no other, and a long pipeline's frontier held whole takes
  // gigabytes on every rank.
  loaded.plan = plan::with_stage_only(plan, static_cast<std::size_t>(stage_));
  const std::vector<plan::PlannedInstruction>& instructions = loaded.instructions(stage_);
  for (std::size_t k = 0; k < instructions.size(); ++k) {
    loaded.clocks_mhz.push_back(static_cast<int>(std::lround(instructions[k].freq_mhz)));
    const nlohmann::json& knob = *instructions[k].knob;
    std::shared_ptr<const CommKnobs>& knobs = decoded[&knob];
    if (!knobs) knobs = std::make_shared<const CommKnobs>(plan::instruction_knobs(knob, field(k) + ".knob", source));
    loaded.knobs.push_back(knobs);
  }
  return loaded;
}

PlanCursor::PlanCursor(const plan::Plan& plan, int stage, FrequencyController* controller,
                       std::string source)
    : stage_(stage), controller_(controller), source_(std::move(source)) {
  plan::validate(plan, source_);
  DecodedKnobs decoded;
  plans_.push_back(load(plan, source_, decoded));
}

PlanCursor::PlanCursor(const std::vector<plan::Plan>& frontier, std::size_t start, int stage,
                       FrequencyController* controller, std::string source)
    : stage_(stage), controller_(controller), source_(std::move(source)) {
  plan::validate_set(frontier, source_);
  load_frontier(frontier, start);
}

PlanCursor::PlanCursor(Validated, const std::vector<plan::Plan>& frontier, std::size_t start, int stage,
                       FrequencyController* controller, std::string source)
    : stage_(stage), controller_(controller), source_(std::move(source)) {
  load_frontier(frontier, start);
}

void PlanCursor::load_frontier(const std::vector<plan::Plan>& frontier, std::size_t start) {
  if (start >= frontier.size()) {
    throw InputError({source_, 0, 0, "plans"},
                     fmt::format("start plan {} is out of range: the frontier holds {}", start,
                                 frontier.size()));
  }
  DecodedKnobs decoded;
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    plans_.push_back(load(frontier[i], fmt::format("{} plans[{}]", source_, i), decoded));
  }
  plan_index_ = start;
}

PlanCursor PlanCursor::open(const std::filesystem::path& path, int stage,
                            FrequencyController* controller, std::optional<std::size_t> index) {
  return PlanCursor(plan::read_plan(path, index), stage, controller, plan::plan_source(path, index));
}

namespace {

std::vector<TimeEnergy> points_of(const std::vector<plan::Plan>& plans) {
  std::vector<TimeEnergy> points;
  for (const plan::Plan& p : plans) points.push_back({p.time_s, p.energy_j});
  return points;
}

}  // namespace

PlanCursor PlanCursor::open_frontier(const std::filesystem::path& path, int stage,
                                     FrequencyController* controller, plan::Target start) {
  // Each plan checked whole as it is read, then cut to this rank's stage: a rank never holds the
  // whole set, gigabytes for a long pipeline.
  std::optional<plan::Plan> first;
  std::vector<plan::Plan> plans = plan::read_plan_set(path, [&](std::size_t, const std::string& where, plan::Plan& p) {
    plan::validate(p, where);
    if (first) plan::check_same_job(p, *first, where);
    if (stage >= 0 && static_cast<std::size_t>(stage) < p.stages.size()) {
      p = plan::with_stage_only(p, static_cast<std::size_t>(stage));
    }
    if (!first) first = p;
  });
  std::size_t chosen = plan::select_plan(points_of(plans), start);
  return PlanCursor(Validated{}, plans, chosen, stage, controller, path.string());
}

std::size_t PlanCursor::set_target_time(double target_time_s, long effective_iteration) {
  if (!(target_time_s > 0) || !std::isfinite(target_time_s)) {
    throw InputError(
        fmt::format("target time {} s is not a positive number of seconds", target_time_s));
  }
  long earliest = position_ == 0 ? iteration_ : iteration_ + 1;
  if (effective_iteration < earliest) {
    throw InputError(fmt::format(
        "a plan switch at iteration {} comes too late: this rank {} iteration {}; every rank of "
        "the pipeline must switch at the same iteration, so name one that has begun on none "
        "(here: {} or later)",
        effective_iteration, position_ == 0 ? "is about to begin" : "is inside", iteration_,
        earliest));
  }
  std::vector<TimeEnergy> points;
  for (const StagePlan& p : plans_) points.push_back({p.plan.time_s, p.plan.energy_j});
  const std::size_t fastest = plan::select_plan(points, {plan::Target::Kind::kMaxThroughput, 0});
  std::size_t chosen = fastest;
  if (target_time_s >= points[fastest].time_s) {
    chosen = plan::select_plan(points, {plan::Target::Kind::kDeadline, target_time_s});
  } else {
    spdlog::info("target time {:.4f} s is below the fastest plan's {:.4f} s; running the fastest",
                 target_time_s, points[fastest].time_s);
  }
  switches_[effective_iteration] = chosen;
  apply_due_switch();
  return chosen;
}

void PlanCursor::apply_due_switch() {
  if (position_ != 0) return;
  // Switches named for iterations this rank has already begun cannot be pending (checked on
  // entry); apply the latest one due now.
  auto due = switches_.upper_bound(iteration_);
  if (due == switches_.begin()) return;
  plan_index_ = std::prev(due)->second;
  switches_.erase(switches_.begin(), due);
}

const plan::PlannedInstruction& PlanCursor::instruction(std::size_t position) const {
  if (position >= current().instructions(stage_).size()) {
    throw InputError(fmt::format("position {} is past stage {}'s {} instructions", position, stage_,
                                 current().instructions(stage_).size()));
  }
  return current().instructions(stage_)[position];
}

const CommKnobs& PlanCursor::knobs(std::size_t position) const {
  instruction(position);  // range check
  return *current().knobs[position];
}

std::string PlanCursor::field(std::size_t position) const {
  return fmt::format("stages[{}].instructions[{}]", stage_, position);
}

namespace {

// A planned instruction's type as the plan format names it (B and W apart from a whole backward).
schedule::OptionSlot type_of(const plan::PlannedInstruction& i) {
  return schedule::option_slot(schedule::Instruction{.type = i.type, .part = i.part});
}

}  // namespace

std::string PlanCursor::describe(std::size_t position) const {
  const auto& i = current().instructions(stage_)[position];
  return fmt::format("{} of microbatch {}", schedule::to_string(type_of(i)), i.microbatch);
}

const CommKnobs& PlanCursor::on_instruction_begin(std::string_view type,
                                                  std::optional<int> microbatch) {
  auto parsed = schedule::parse_option_slot(type);
  if (!parsed) {
    throw InputError(fmt::format(
        "instruction type '{}' is not one of \"forward\", \"backward\", \"backward_input\", \"backward_weight\"",
        type));
  }
  return on_instruction_begin(*parsed, microbatch);
}

const CommKnobs& PlanCursor::on_instruction_begin(schedule::InstructionType type,
                                                  std::optional<int> microbatch) {
  return on_instruction_begin(schedule::option_slot(type), microbatch);
}

const CommKnobs& PlanCursor::on_instruction_begin(schedule::OptionSlot type,
                                                  std::optional<int> microbatch) {
  const StagePlan& p = current();
  if (position_ >= p.instructions(stage_).size()) {
    throw InputError(
        {source_, 0, 0, fmt::format("stages[{}]", stage_)},
        fmt::format("iteration {}: the training loop began a {} instruction after all {} "
                    "of stage {}'s instructions; call on_step_end() after each iteration",
                    iteration_, schedule::to_string(type), p.instructions(stage_).size(), stage_));
  }
  const auto& expected = p.instructions(stage_)[position_];
  if (type_of(expected) != type || (microbatch && *microbatch != expected.microbatch)) {
    std::string began =
        microbatch ? fmt::format("{} of microbatch {}", schedule::to_string(type), *microbatch)
                   : fmt::format("a {}", schedule::to_string(type));
    throw InputError(
        {source_, 0, 0, field(position_)},
        fmt::format("iteration {}, instruction {} of {} on stage {}: the training loop "
                    "began {}, but the plan runs {} here; the job's pipeline schedule "
                    "differs from the plan's ({}, {} microbatches)",
                    iteration_, position_, p.instructions(stage_).size(), stage_, began,
                    describe(position_), schedule::to_string(p.plan.schedule),
                    p.plan.num_microbatches));
  }
  const int clock_mhz = p.clocks_mhz[position_];
  if (controller_ && stream_) {
    stream_->enqueue([controller = controller_, keep = controller_owner_, clock_mhz] {
      controller->request_sm_clock(clock_mhz);
    });
  } else if (controller_) {
    controller_->request_sm_clock(clock_mhz);
  }
  return *p.knobs[position_++];
}

void PlanCursor::set_stream(std::shared_ptr<StreamMarker> stream, std::shared_ptr<FrequencyController> controller_owner) {
  stream_ = std::move(stream);
  controller_owner_ = stream_ ? std::move(controller_owner) : nullptr;
}

void PlanCursor::on_step_end() {
  std::size_t consumed = position_;
  std::size_t planned = current().instructions(stage_).size();
  std::string next = consumed < planned ? describe(consumed) : std::string();
  position_ = 0;
  long iteration = iteration_++;
  apply_due_switch();
  if (consumed != planned) {
    throw InputError({source_, 0, 0, field(consumed)},
                     fmt::format("iteration {} ended after {} of stage {}'s {} instructions; the "
                                 "next one was {}",
                                 iteration, consumed, stage_, planned, next));
  }
}

}  // namespace kareus::runtime
