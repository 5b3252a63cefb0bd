"""The Python cursor, the Zeus drop-ins and the straggler switch on the real planner's output:
`kareus plan` (KAREUS_BINARY) plans a small job with full activation checkpointing, and every
instruction's knobs and clock are checked against the raw plan.json/plans.json it wrote."""
import json
import os
import subprocess

import pytest

import kareus


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "out"
    result = subprocess.run(
        [os.environ["KAREUS_BINARY"], "plan", "--microbatches", "4", "--checkpointing", "full",
         "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


def raw_knobs(instruction, name):
    """{key: (slot, sms)} of one list of an instruction's knob, straight from the planner's JSON."""
    return {k["key"]: (k["slot"], k["sms"]) for k in instruction.get("knob", {}).get(name, [])}


def test_python_cursor_hands_out_the_planners_knobs(planned):
    plan = json.loads((planned / "plan.json").read_text())
    recomputing = 0
    for stage in range(plan["num_stages"]):
        gpu = kareus.FakeGpu()
        with kareus.FrequencyController([gpu]) as controller:
            cursor = kareus.PlanCursor(str(planned / "plan.json"), stage=stage, controller=controller)
            for ins in plan["stages"][stage]["instructions"]:
                knobs = cursor.on_instruction_begin(ins["type"], ins["microbatch"])
                assert raw_knobs({"knob": knobs}, "partitions") == raw_knobs(ins, "partitions")
                assert raw_knobs({"knob": knobs}, "recompute") == raw_knobs(ins, "recompute")
                assert knobs["partitions"], "a Kareus plan carries partition knobs"
                recomputing += ins["type"] == "backward" and bool(knobs["recompute"])
                controller.wait_idle()
                assert gpu.locked_sm_clock_mhz == round(ins["freq_mhz"])
            cursor.on_step_end()
    assert recomputing > 0, "full checkpointing recomputes forwards inside backwards"


@pytest.fixture(scope="module")
def planned_zero_bubble(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan-zb") / "out"
    result = subprocess.run(
        [os.environ["KAREUS_BINARY"], "plan", "--microbatches", "4", "--schedule", "zb-h1", "--out", str(out)],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


def test_python_cursor_and_zeus_optimizer_run_a_zero_bubble_plan(planned_zero_bubble):
    """A zb-h1 plan's B and W instructions ("backward_input", "backward_weight") reach the loop
    with their own clocks, through the cursor and the Zeus drop-in alike."""
    path = planned_zero_bubble / "plan.json"
    plan = json.loads(path.read_text())
    types = {ins["type"] for st in plan["stages"] for ins in st["instructions"]}
    assert {"backward_input", "backward_weight"} <= types
    for stage in range(plan["num_stages"]):
        gpu = kareus.FakeGpu(index=stage)
        with kareus.PipelineFrequencyOptimizer(
                rank=stage, dp_rank=0, pp_rank=stage, tp_rank=0, device_id=stage, dp_degree=1,
                pp_degree=plan["num_stages"], tp_degree=8, world_size=8 * plan["num_stages"],
                plan=str(path), gpus=[gpu]) as pfo:
            pfo.on_step_begin()
            for ins in plan["stages"][stage]["instructions"]:
                knobs = pfo.on_instruction_begin(ins["type"])
                assert raw_knobs({"knob": knobs}, "partitions") == raw_knobs(ins, "partitions")
                assert raw_knobs({"knob": knobs}, "recompute") == raw_knobs(ins, "recompute")
                pfo.frequency_controller.wait_idle()
                assert gpu.locked_sm_clock_mhz == round(ins["freq_mhz"])
                pfo.on_instruction_end(ins["type"])
            pfo.on_step_end()
    cursor = kareus.PlanCursor(str(path), stage=0)
    with pytest.raises(kareus.InputError, match="backward_input"):
        for ins in plan["stages"][0]["instructions"]:
            cursor.on_instruction_begin("backward" if ins["type"] == "backward_input" else ins["type"])


def test_zeus_pipeline_frequency_optimizer_runs_the_plan(planned):
    plan = json.loads((planned / "plan.json").read_text())
    gpu = kareus.FakeGpu(index=1)
    with kareus.PipelineFrequencyOptimizer(
            rank=1, dp_rank=0, pp_rank=1, tp_rank=0, device_id=1, dp_degree=1,
            pp_degree=plan["num_stages"], tp_degree=8, world_size=8 * plan["num_stages"],
            server_url="file://" + str(planned / "plan.json"), gpus=[gpu]) as pfo:
        for _ in range(2):
            pfo.on_step_begin()
            for ins in plan["stages"][1]["instructions"]:
                knobs = pfo.on_instruction_begin(ins["type"])
                assert raw_knobs({"knob": knobs}, "partitions") == raw_knobs(ins, "partitions")
                pfo.frequency_controller.wait_idle()
                assert gpu.locked_sm_clock_mhz == round(ins["freq_mhz"])
                pfo.on_instruction_end(ins["type"])
            pfo.on_step_end()
        with pytest.raises(kareus.InputError, match="backward"):
            pfo.on_instruction_begin("forward")
            pfo.on_instruction_end("backward")
    assert gpu.locked_sm_clock_mhz is None  # closed: clocks reset
    with pytest.raises(kareus.InputError, match="local file"):
        kareus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 2, 8, 16, "http://pfo:7787", gpus=[gpu])
    with pytest.raises(kareus.InputError, match="pp_degree is 3"):
        kareus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 3, 8, 24, plan=str(planned / "plan.json"),
                                          gpus=[kareus.FakeGpu()])


def test_gpu_timed_cursor_and_optimizer_set_each_clock_when_the_gpu_gets_there(planned):
    """With a (fake) stream the host issues the whole iteration ahead of the GPU, yet each clock is
    asked for only when the GPU reaches its instruction: the plan's clock at every GPU start."""
    plan = json.loads((planned / "plan.json").read_text())
    instructions = plan["stages"][0]["instructions"]
    gpu = kareus.FakeGpu()
    with kareus.FrequencyController([gpu]) as controller:
        cursor = kareus.PlanCursor(str(planned / "plan.json"), stage=0, controller=controller)
        stream = kareus.FakeStream()
        cursor.set_stream(stream)
        assert cursor.gpu_timed
        starts = []
        for ins in instructions:
            starts.append(stream.device_free_s)
            cursor.on_instruction_begin(ins["type"], ins["microbatch"])
            stream.enqueue_work(ins["time_s"])
        controller.wait_idle()
        assert gpu.locked_sm_clock_mhz is None, "nothing is asked for before the GPU gets there"
        for start, ins in zip(starts, instructions):
            stream.run_until(start)
            controller.wait_idle()
            assert gpu.locked_sm_clock_mhz == round(ins["freq_mhz"])
        stream.drain()
        cursor.on_step_end()
        cursor.set_stream(None)
        assert not cursor.gpu_timed

    gpu = kareus.FakeGpu()
    stream = kareus.FakeStream()
    with kareus.PipelineFrequencyOptimizer(
            0, 0, 0, 0, 0, 1, plan["num_stages"], 8, 16, plan=str(planned / "plan.json"), gpus=[gpu],
            sync=False, stream=stream) as pfo:
        pfo.on_step_begin()
        first = instructions[0]
        pfo.on_instruction_begin(first["type"])
        pfo.frequency_controller.wait_idle()
        assert gpu.locked_sm_clock_mhz is None
        stream.drain()
        pfo.frequency_controller.wait_idle()
        assert gpu.locked_sm_clock_mhz == round(first["freq_mhz"])
    with pytest.raises(kareus.InputError, match="sync=False"):
        kareus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, plan["num_stages"], 8, 16,
                                          plan=str(planned / "plan.json"), gpus=[kareus.FakeGpu()],
                                          stream=kareus.FakeStream())


def test_zeus_monitor_answers_as_zeus_does(tmp_path):
    clock = kareus.ManualClock()
    gpus = [kareus.FakeGpu(index=i, clock=clock) for i in range(2)]
    monitor = kareus.ZeusMonitor(gpus=gpus, clock=clock, log_file=tmp_path / "zeus.csv")
    monitor.begin_window("step")
    clock.advance_s(2.0)
    m = monitor.end_window("step")
    idle_w = gpus[0].power_w(1410, 0.0)
    assert m.time == pytest.approx(2.0)
    assert m.gpu_energy == pytest.approx({0: 2 * idle_w, 1: 2 * idle_w})
    assert m.total_energy == pytest.approx(4 * idle_w)
    monitor.begin_window("dropped")
    assert monitor.end_window("dropped", cancel=True) is None
    assert not monitor.is_open("dropped")
    assert (tmp_path / "zeus.csv").read_text().startswith("start_time,window_name,elapsed_time,gpu0_energy")
    with pytest.raises(kareus.InputError):
        kareus.ZeusMonitor(gpus=gpus, cpu_indices=[0])


def test_straggler_switches_every_rank_at_the_named_iteration(planned):
    plans = json.loads((planned / "plans.json").read_text())["plans"]
    assert len(plans) >= 2
    fastest = min(range(len(plans)), key=lambda i: plans[i]["time_s"])
    target_s = 1.2 * plans[fastest]["time_s"]
    in_time = [i for i in range(len(plans)) if plans[i]["time_s"] <= target_s]
    expected = min(in_time, key=lambda i: plans[i]["energy_j"])
    stages = plans[0]["num_stages"]
    cursors = [kareus.PlanCursor.frontier(str(planned / "plans.json"), stage=s) for s in range(stages)]
    for cursor in cursors:
        assert cursor.plan_index == fastest
        assert cursor.on_straggler(target_s, iteration=2) == expected
    for iteration in range(3):
        for s, cursor in enumerate(cursors):
            running = fastest if iteration < 2 else expected
            assert cursor.plan_index == running
            assert cursor.plan_time_s == plans[running]["time_s"]
            for ins in plans[running]["stages"][s]["instructions"]:
                knobs = cursor.on_instruction_begin(ins["type"], ins["microbatch"])
                assert raw_knobs({"knob": knobs}, "partitions") == raw_knobs(ins, "partitions")
            if iteration == 0 and s == 0:
                with pytest.raises(kareus.InputError, match="must switch at the same iteration"):
                    cursor.set_target_time(target_s, iteration=0)
            cursor.on_step_end()
    assert plans[expected]["energy_j"] < plans[fastest]["energy_j"]
