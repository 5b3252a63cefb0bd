"""Drop-ins for Zeus (zeus.optimizer.pipeline_frequency.PipelineFrequencyOptimizer and
zeus.monitor.ZeusMonitor), so a training loop patched for Perseus runs Kareus's plan by changing
its imports:

    from kareus import PipelineFrequencyOptimizer   # was: from zeus.optimizer.pipeline_frequency ...
    pfo = PipelineFrequencyOptimizer(rank=..., dp_rank=..., pp_rank=..., tp_rank=...,
                                     device_id=..., dp_degree=..., pp_degree=..., tp_degree=...,
                                     world_size=..., plan="kareus-out/plan.json")
    pfo.on_step_begin()
    knobs = pfo.on_instruction_begin("forward")   # Zeus returns nothing; Kareus adds the knobs
    ...
    pfo.on_instruction_end("forward")
    pfo.on_step_end()

The plan is a local file: no PFO server, no HTTP. With a plan set (plans.json) the optimizer can
switch plans for stragglers (set_target_time / on_straggler, see PlanCursor).
"""
from __future__ import annotations

import json
import os
import sys

from . import _kareus


def _synchronize(device_ids) -> None:
    """Waits for the GPUs' queued work, as Zeus does, when PyTorch is in use and CUDA is up."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    for device in device_ids:
        torch.cuda.synchronize(device)


def _is_plan_set(path) -> bool:
    with open(path, encoding="utf-8") as f:
        try:
            doc = json.load(f)
        except ValueError as e:
            raise _kareus.InputError(f"{path}: not valid JSON: {e}") from None
    return isinstance(doc, dict) and doc.get("format") == "kareus-plan-set"


def _framework_stream(device_id: int) -> int:
    """The handle of PyTorch's current CUDA stream on `device_id`, for GPU-timed clocks."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        raise _kareus.InputError("PipelineFrequencyOptimizer(sync=False): no PyTorch CUDA stream here; pass "
                                 "stream= (a CUDA stream handle, or a kareus.FakeStream)")
    return torch.cuda.current_stream(device_id).cuda_stream


class PipelineFrequencyOptimizer:
    """Zeus's PipelineFrequencyOptimizer client, run from a local Kareus plan.

    Keywords as Zeus's: rank, dp_rank, pp_rank (the pipeline stage), tp_rank, device_id (the CUDA
    device whose clock is set), dp_degree, pp_degree (must equal the plan's stages), tp_degree,
    world_size, job_metadata (kept for logs). Zeus's server_url may name the plan file instead of
    `plan` (a path or file://PATH); an http(s) URL is refused, since nothing is fetched.

    Kareus's own keywords: plan (plan.json, or a plan set such as plans.json), plan_index (one plan
    of a set; otherwise a set is loaded whole as a frontier and `start` picks the first plan),
    gpus (devices to control; default kareus.nvml_gpu(device_id)), controller (an existing
    FrequencyController to use instead; it is then not stopped by close()).

    When clocks change: by default as Zeus does it, synchronising the device at every
    on_instruction_begin so the clock lands on the instruction, at the cost of the host's issue
    latency at every instruction (the GPU waits while the host issues the first kernels). With
    sync=False the host never waits: the clock is asked for when the GPU reaches the instruction on
    `stream` (an int CUDA stream handle, default torch.cuda.current_stream(device_id), or a
    kareus.FakeStream in tests), through a marker the cursor enqueues there.
    """

    def __init__(self, rank: int, dp_rank: int, pp_rank: int, tp_rank: int, device_id: int,
                 dp_degree: int, pp_degree: int, tp_degree: int, world_size: int,
                 server_url: str | None = None, job_metadata: str | None = None, *,
                 plan: str | os.PathLike | None = None, plan_index: int | None = None,
                 start: str = "max-throughput", gpus=None, controller=None, sync: bool = True,
                 stream=None) -> None:
        if plan is None:
            if server_url is None:
                raise _kareus.InputError("PipelineFrequencyOptimizer: give plan= (a Kareus plan.json "
                                         "or plans.json)")
            if server_url.startswith(("http://", "https://")):
                raise _kareus.InputError(
                    f"PipelineFrequencyOptimizer: server_url={server_url!r} is a PFO server; Kareus "
                    "reads its plan from a local file: pass plan='.../plan.json'")
            plan = server_url[len("file://"):] if server_url.startswith("file://") else server_url
        self.rank, self.dp_rank, self.pp_rank, self.tp_rank = rank, dp_rank, pp_rank, tp_rank
        self.device_id = device_id
        self.dp_degree, self.pp_degree, self.tp_degree = dp_degree, pp_degree, tp_degree
        self.world_size = world_size
        self.job_metadata = job_metadata
        self.plan_path = os.fspath(plan)

        self._owns_controller = controller is None
        if controller is None:
            if gpus is None:
                gpus = [_kareus.nvml_gpu(device_id)]
            controller = _kareus.FrequencyController(list(gpus))
        self.frequency_controller = controller
        try:
            if plan_index is None and _is_plan_set(self.plan_path):
                self.cursor = _kareus.PlanCursor.frontier(self.plan_path, pp_rank, controller, start)
            else:
                self.cursor = _kareus.PlanCursor(self.plan_path, pp_rank, controller, plan_index)
            if self.cursor.num_stages != pp_degree:
                raise _kareus.InputError(
                    f"{self.plan_path}: the plan has {self.cursor.num_stages} pipeline stages but "
                    f"pp_degree is {pp_degree}")
        except BaseException:
            self.close()
            raise
        self.sync = sync
        if sync and stream is not None:
            self.close()
            raise _kareus.InputError("PipelineFrequencyOptimizer: stream= is for sync=False (GPU-timed clocks); "
                                     "with sync=True the device is synchronised instead")
        if not sync:
            try:
                self.cursor.set_stream(_framework_stream(device_id) if stream is None else stream)
            except BaseException:
                self.close()
                raise
        self._running: str | None = None
        self.knobs: dict = {"partitions": [], "recompute": []}

    def on_step_begin(self) -> None:
        """Marks the beginning of a step (an iteration)."""
        if self.cursor.position != 0:
            raise _kareus.InputError(
                f"on_step_begin: the previous step ran {self.cursor.position} instructions and "
                "was not ended with on_step_end()")

    def on_step_end(self) -> None:
        """Marks the end of a step; raises InputError when the plan's instructions were not all run."""
        self.cursor.on_step_end()

    def on_instruction_begin(self, name: str) -> dict:
        """Checks that `name` ("forward", "backward", or zb-h1's "backward_input" and
        "backward_weight") is the plan's next instruction, sets its
        clock and returns its communication knobs (also kept as self.knobs)."""
        if self.sync:
            _synchronize([self.device_id])
        self.knobs = self.cursor.on_instruction_begin(name)
        self._running = name
        return self.knobs

    def on_instruction_end(self, name: str) -> None:
        """Marks the end of an instruction."""
        if self._running != name:
            raise _kareus.InputError(
                f"on_instruction_end({name!r}) without a matching on_instruction_begin "
                f"(running: {self._running!r})")
        self._running = None

    def set_target_time(self, target_time_s: float, iteration: int) -> int:
        """From step `iteration` on, the least-energy plan within target_time_s (PlanCursor)."""
        return self.cursor.set_target_time(target_time_s, iteration)

    def on_straggler(self, iteration_time_s: float, iteration: int) -> int:
        """Slows to the straggler's iteration time from step `iteration` on (PlanCursor)."""
        return self.cursor.on_straggler(iteration_time_s, iteration)

    def close(self) -> None:
        """Stops the frequency controller it made (resetting the clocks)."""
        controller = getattr(self, "frequency_controller", None)
        if controller is not None and self._owns_controller:
            controller.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ZeusMonitor(_kareus.EnergyMonitor):
    """zeus.monitor.ZeusMonitor's constructor and window calls over Kareus's EnergyMonitor.

    gpu_indices: CUDA indices to monitor (default every GPU this process sees); cpu_indices must be
    empty or None (Kareus measures GPUs only); approx_instant_energy and log_file as Zeus's;
    sync_execution_with: "torch" (the only framework synchronized). `gpus` (Kareus) monitors the
    given devices instead, e.g. FakeGpu objects. end_window returns a Measurement with Zeus's
    `time`, `gpu_energy` (by GPU index) and `total_energy`, and Kareus's names beside them.
    """

    def __init__(self, gpu_indices=None, cpu_indices=None, approx_instant_energy: bool = False,
                 log_file=None, sync_execution_with: str = "torch", *, gpus=None, clock=None):
        if cpu_indices:
            raise _kareus.InputError("ZeusMonitor: Kareus measures GPUs only; pass cpu_indices=None")
        if sync_execution_with != "torch":
            raise _kareus.InputError(
                f"ZeusMonitor: sync_execution_with={sync_execution_with!r}: only 'torch' is supported")
        if gpus is None:
            every = _kareus.nvml_gpus()
            gpus = every if gpu_indices is None else [every[i] for i in gpu_indices]
        gpus = list(gpus)
        super().__init__(gpus, log_csv=None if log_file is None else os.fspath(log_file),
                         clock=clock, approximate_short_windows=approx_instant_energy)

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        if sync_execution:
            _synchronize(self.gpu_indices)
        super().begin_window(key)

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False):
        """Ends the window and returns its Measurement; with cancel=True forgets it (None)."""
        if sync_execution:
            _synchronize(self.gpu_indices)
        if cancel:
            super().cancel_window(key)
            return None
        return super().end_window(key)
