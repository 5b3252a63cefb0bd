"""Kareus runtime: apply a Kareus plan's GPU clocks and communication knobs inside a training loop,
and measure time and energy.

The compiled classes (GPUs, FrequencyController, PlanCursor, EnergyMonitor) come from
kareus._kareus; kareus.zeus adds drop-ins for Zeus's PipelineFrequencyOptimizer and ZeusMonitor.
"""
from ._kareus import *  # noqa: F401,F403 (the compiled module's public names)
from ._kareus import __doc__ as _compiled_doc  # noqa: F401
from .zeus import PipelineFrequencyOptimizer, ZeusMonitor  # noqa: F401
