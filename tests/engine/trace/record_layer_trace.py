"""Records tests/engine/trace/layer_cpu_trace.json: a real torch.profiler trace of a small
transformer layer on this machine's CPU, its calls labelled as `kareus hw fit --engine-trace` reads
them. The un-split layer labels each module call kareus:layer_op; the nanobatched one runs each
half of the batch op by op inside kareus:partition spans, each op a kareus:partition_op and the
other half's all-reduce (gloo, one rank) a kareus:collective_call. Tiny tensors, so that the CPU
ops' time is their host cost, not their arithmetic. Run with Debian's python3-torch:

    /usr/bin/python3 tests/engine/trace/record_layer_trace.py
"""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function


class Layer(nn.Module):
    def __init__(self, hidden=16, ffn=32):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 2 * ffn), nn.Linear(ffn, hidden)

    def attention(self, x):
        q, k, v = x.chunk(3, -1)
        return torch.softmax(q @ k.transpose(-1, -2) / 4, -1) @ v

    def swiglu(self, x):
        g, u = x.chunk(2, -1)
        return nn.functional.silu(g) * u

    def segments(self):
        """The layer cut after each all-reduce, as op lists (each op: x -> x)."""
        return [[self.ln1, self.qkv, self.attention, self.proj],
                [self.ln2, self.fc1, self.swiglu, self.fc2]]

    def unsplit(self, x):
        for ops in self.segments():
            residual = x
            for op in ops:
                with record_function("kareus:layer_op"):
                    x = op(x)
            with record_function("kareus:collective_call"):
                dist.all_reduce(x)
            x = x + residual
        return x

    def nanobatched(self, x):
        halves = list(x.chunk(2, 0))
        pending = None
        for ops in self.segments():
            residuals = list(halves)
            for n in range(2):
                with record_function("kareus:partition"):
                    if pending is not None:
                        with record_function("kareus:collective_call"):
                            work = dist.all_reduce(pending, async_op=True)
                    for op in ops:
                        with record_function("kareus:partition_op"):
                            halves[n] = op(halves[n])
                    if pending is not None:
                        work.wait()
                    pending = halves[n]
            halves = [h + r for h, r in zip(halves, residuals)]
        return torch.cat(halves, 0)


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    store = os.path.join(tempfile.mkdtemp(prefix="kareus-trace-"), "store")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    layer, x = Layer(), torch.randn(4, 8, 16)
    for _ in range(3):  # warm up
        layer.unsplit(x).sum().backward()
        layer.nanobatched(x).sum().backward()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        layer.unsplit(x).sum().backward()
        layer.nanobatched(x).sum().backward()
    prof.export_chrome_trace(os.path.join(os.path.dirname(os.path.abspath(__file__)), "layer_cpu_trace.json"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
