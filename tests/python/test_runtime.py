"""The `kareus` Python module drives a fake training loop as the C++ runtime does: the plan's clocks
reach the GPU, energy follows the fake's power model, and mismatches raise kareus.InputError naming
the position. The knobs are checked on the real planner's output (test_real_plan.py). Run by ctest
with PYTHONPATH=<build>/python."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import kareus


def instruction(type_, microbatch, freq_mhz):
    forward = type_ == "forward"
    return {"type": type_, "microbatch": microbatch, "freq_mhz": freq_mhz,
            "time_s": 0.05 if forward else 0.1, "energy_j": 20.0 if forward else 40.0}


@pytest.fixture
def plan_path(tmp_path):
    """A clock-only 1F1B plan (as `kareus frontier` writes from a Perseus profile), 2 stages, 2
    microbatches."""
    plan = {
        "format": "kareus-plan", "version": 1, "schedule": "1f1b", "num_stages": 2,
        "num_microbatches": 2, "p_blocking_w": 85.0, "unit_time_s": 0.001,
        "energy_scope": "one GPU per pipeline stage (2 GPUs), idle time charged at P_blocking",
        "time_s": 1.0, "energy_j": 100.0,
        "stages": [
            {"stage": 0, "instructions": [
                instruction("forward", 0, 1410), instruction("forward", 1, 1005),
                instruction("backward", 0, 810), instruction("backward", 1, 1410)]},
            {"stage": 1, "instructions": [
                instruction("forward", 0, 1200), instruction("backward", 0, 1200),
                instruction("forward", 1, 990), instruction("backward", 1, 990)]},
        ],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def test_fake_training_loop(plan_path, tmp_path):
    clock = kareus.ManualClock()
    gpu = kareus.FakeGpu(index=0, clock=clock)
    log = tmp_path / "energy.csv"
    monitor = kareus.EnergyMonitor([gpu], log_csv=str(log), clock=clock)
    expected_j = 0.0
    with kareus.FrequencyController([gpu]) as controller:
        assert gpu.locked_memory_clock_mhz == 1215
        cursor = kareus.PlanCursor(str(plan_path), stage=0, controller=controller)
        assert [i["type"] for i in cursor.instructions] == ["forward", "forward", "backward", "backward"]
        for iteration in range(3):
            monitor.begin_window("iteration")
            for planned in cursor.instructions:
                monitor.begin_window(planned["type"])  # nested in the iteration
                knobs = cursor.on_instruction_begin(planned["type"], planned["microbatch"])
                controller.wait_idle()
                assert gpu.locked_sm_clock_mhz == planned["freq_mhz"]
                assert knobs == {"partitions": [], "recompute": []}  # a clock-only plan
                gpu.set_load(1.0)
                clock.advance_s(planned["time_s"])
                gpu.set_load(0.0)
                expected_j += gpu.power_w(planned["freq_mhz"], 1.0) * planned["time_s"]
                inner = monitor.end_window(planned["type"])
                assert inner.elapsed_s == pytest.approx(planned["time_s"])
            cursor.on_step_end()
            m = monitor.end_window("iteration")
            assert m.elapsed_s == pytest.approx(0.3)
        stats = controller.stats(0)
        assert stats["requests"] == 12
        assert stats["applied"] == 10  # 1410 at the end of one iteration and the start of the next
        assert "GPU 0: 12 requests" in controller.report()
    assert gpu.locked_sm_clock_mhz is None  # reset when the with-block ends
    assert gpu.locked_memory_clock_mhz is None
    assert gpu.total_energy_mj() / 1000 == pytest.approx(expected_j)
    lines = log.read_text().splitlines()
    assert lines[0] == "start_time,window_name,elapsed_time,gpu0_energy"
    assert len(lines) == 1 + 3 * 5

    # The log replays: a ReplayGpu on the same time axis reads the same energy.
    replay_clock = kareus.ManualClock()
    replay = kareus.ReplayGpu(str(log), index=0, clock=replay_clock, time_offset_s=0.0)
    replay_clock.advance_s(0.9)
    assert replay.total_energy_mj() / 1000 == pytest.approx(expected_j)


def test_mismatches_raise_input_errors(plan_path):
    cursor = kareus.PlanCursor(str(plan_path), stage=1)
    cursor.on_instruction_begin("forward")
    with pytest.raises(kareus.InputError, match=r"stages\[1\]\.instructions\[1\]"):
        cursor.on_instruction_begin("forward")
    assert cursor.position == 1
    with pytest.raises(ValueError, match="ended after 1 of stage 1's 4 instructions"):
        cursor.on_step_end()
    assert cursor.position == 0
    with pytest.raises(kareus.InputError, match="stage 5 is not in the plan"):
        kareus.PlanCursor(str(plan_path), stage=5)


def test_monitor_windows_nest_overlap_and_cancel():
    clock = kareus.ManualClock(start_s=5.0)
    gpus = [kareus.FakeGpu(index=i, clock=clock) for i in range(2)]
    monitor = kareus.EnergyMonitor(gpus, clock=clock)
    monitor.begin_window("outer")
    clock.advance_s(1.0)
    monitor.begin_window("inner")
    monitor.begin_window("cancelled")
    clock.advance_s(1.0)
    monitor.cancel_window("cancelled")
    assert not monitor.is_open("cancelled")
    inner = monitor.end_window("inner")
    outer = monitor.end_window("outer")
    idle_w = gpus[0].power_w(1410, 0.0)
    assert inner.elapsed_s == pytest.approx(1.0)
    assert outer.elapsed_s == pytest.approx(2.0)
    assert outer.gpu_energy_j == pytest.approx([2 * idle_w, 2 * idle_w])
    assert outer.total_energy_j == pytest.approx(4 * idle_w)
    # Zeus's names answer too: ZeusMonitor code reads the measurement unchanged.
    assert outer.time == outer.elapsed_s
    assert outer.gpu_energy == pytest.approx({0: 2 * idle_w, 1: 2 * idle_w})
    assert outer.total_energy == outer.total_energy_j
    assert monitor.gpu_indices == [0, 1]
    with pytest.raises(kareus.InputError):
        monitor.end_window("inner")


def test_nvml_fails_cleanly_without_a_driver():
    try:
        gpus = kareus.nvml_gpus()
    except kareus.DeviceError as e:
        assert "NVML not available" in str(e)
    else:
        assert isinstance(gpus, list)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_reset_the_clocks_then_end_the_process(tmp_path, signum):
    """A Python process holding a controller gets SIGTERM (default action) or SIGINT (Python's
    KeyboardInterrupt handler): the clocks are reset, then the signal takes its usual course."""
    marker = tmp_path / "ready"
    script = textwrap.dedent(f"""
        import time, kareus
        gpu = kareus.FakeGpu()
        controller = kareus.FrequencyController([gpu])
        controller.request_sm_clock(810)
        controller.wait_idle()
        open({str(marker)!r}, "w").write(str(gpu.locked_sm_clock_mhz))
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for _ in range(1200):
        if marker.exists() and marker.read_text():
            break
        assert child.poll() is None, child.stdout.read()
        time.sleep(0.05)
    assert marker.read_text() == "810"
    child.send_signal(signum)
    output, _ = child.communicate(timeout=60)
    name = signal.Signals(signum).name
    assert f"caught {name}: resetting GPU clocks" in output
    # SIGTERM: killed by it. SIGINT: Python raises KeyboardInterrupt, then exits by SIGINT too.
    assert child.returncode == -signum, output
