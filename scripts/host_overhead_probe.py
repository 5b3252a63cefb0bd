"""Host (CPU) cost of the calls an engine file prices, measured here, beside the file's constants.

Each figure is the host time of one call with the GPU never the bottleneck (tiny tensors, no
synchronisation inside the timed loop), the median of several rounds. What each informs:
  eager_op          a small ATen op (torch.add): the floor of any framework call
  linear_module     torch.nn.Linear's forward, a module call
  te_linear         transformer_engine.pytorch.Linear's forward (layer_op_us, partition_op_us)
  event             torch.cuda.Event().record (event_us)
  collective_call   torch.distributed.all_reduce on a one-rank group (collective_call_us)
  empty_queue_op    issue-to-done of one tiny op on an idle device (launch latency plus a sync)

Usage: python3 scripts/host_overhead_probe.py [--device cuda|cpu] [--engine FILE]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def per_call_us(fn, calls, rounds=5, sync=None):
    results = []
    for _ in range(rounds):
        if sync:
            sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        results.append((time.perf_counter() - start) / calls * 1e6)
    if sync:
        sync()
    return statistics.median(results)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--engine", default=os.path.join(os.path.dirname(__file__), "..", "data", "engines",
                                                         "megatron-te-eager.json"))
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("host-overhead-check: PyTorch is not installed here; nothing measured")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("host-overhead-check: no CUDA device visible to PyTorch; nothing measured")
        return 0
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else None
    with open(args.engine) as f:
        engine = json.load(f)
    host = engine["host"]

    x = torch.ones(16, 16, device=device)
    y = torch.ones(16, 16, device=device)
    z = torch.empty(16, 16, device=device)
    rows = [("eager_op", per_call_us(lambda: torch.add(x, y, out=z), args.calls, sync=sync), None)]
    linear = torch.nn.Linear(16, 16).to(device)
    with torch.no_grad():
        rows.append(("linear_module", per_call_us(lambda: linear(x), args.calls, sync=sync), None))
    try:
        import transformer_engine.pytorch as te
        te_linear = te.Linear(16, 16).to(device)
        with torch.no_grad():
            rows.append(("te_linear", per_call_us(lambda: te_linear(x), args.calls, sync=sync), "layer_op_us"))
    except Exception as e:  # absent, or not built for this device
        print(f"host-overhead-check: TransformerEngine not measured ({type(e).__name__})", file=sys.stderr)
    if args.device == "cuda":
        event = torch.cuda.Event()
        rows.append(("event", per_call_us(lambda: event.record(), args.calls, sync=sync), "event_us"))

        def empty_queue_op():
            torch.add(x, y, out=z)
            torch.cuda.synchronize()
        rows.append(("empty_queue_op", per_call_us(empty_queue_op, max(1, args.calls // 10)), "launch_latency_us"))
    try:
        import torch.distributed as dist
        store = os.path.join(tempfile.mkdtemp(prefix="kareus-host-probe-"), "store")
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo", init_method=f"file://{store}",
                                rank=0, world_size=1)
        rows.append(("collective_call", per_call_us(lambda: dist.all_reduce(z, async_op=True), args.calls // 4,
                                                    sync=sync), "collective_call_us"))
        dist.destroy_process_group()
    except Exception as e:
        print(f"host-overhead-check: the collective call not measured ({type(e).__name__}: {e})", file=sys.stderr)

    print(f"Host cost per call on this machine ({args.device}, torch {torch.__version__}), "
          f"beside {engine['name']}'s constants")
    print(f"{'call':<18} {'measured_us':>12} {'engine_us':>10}  constant")
    for name, us, constant in rows:
        theirs = f"{host[constant]:>10g}" if constant else f"{'-':>10}"
        print(f"{name:<18} {us:>12.2f} {theirs}  {constant or ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
