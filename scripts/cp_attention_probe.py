"""A trace of context-parallel attention for `kareus hw fit --engine-trace`: where its host waits.

On the Kareus cluster the model lacks 0.5-1 ms per context-parallel layer pass, mostly at a waiting
GPU's power (docs/model.md), and TransformerEngine's all-gather CP attention as read holds no host
wait. This runs that attention on two ranks, forward and backward, each pass labelled
record_function("kareus:layer_op"), under torch.profiler with the CUDA runtime recorded, and
writes rank 0's trace. `kareus hw fit --engine-trace TRACE` then names the CPU op behind every call
that blocks the host on the GPU and counts the passes that hold one.

The attention is TransformerEngine's DotProductAttention with cp_comm_type "all_gather" (as the
artifact ran it) where TransformerEngine is installed and the device is CUDA; else the same steps
in plain PyTorch (K and V gathered, put in sequence order, attention per local chunk under the
causal mask, each chunk's output copied into place), which on CPU (gloo) checks the flow, not a
cluster.

Usage: python3 scripts/cp_attention_probe.py --out trace.json [--device cuda|cpu] [--passes 8]
"""
import argparse
import os
import socket
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plain_cp_attention(torch, dist_nn, group, rank, q, k, v):
    """TransformerEngine's all-gather CP attention, step by step, for two ranks, sbhd layout.

    Rank r holds sequence chunks r and 3 - r of the four (load balance under the causal mask)."""
    cp = 2
    c = q.shape[0] // 2
    ks = dist_nn.all_gather(k.contiguous(), group=group)
    vs = dist_nn.all_gather(v.contiguous(), group=group)
    # Gathered in rank order: chunks 0, 3, 1, 2; in sequence order their rows are 0, 2, 3, 1.
    order = torch.tensor([0, 2, 3, 1], device=q.device)
    k_seq = torch.index_select(torch.cat(ks).view(2 * cp, c, *k.shape[1:]), 0, order).flatten(0, 1)
    v_seq = torch.index_select(torch.cat(vs).view(2 * cp, c, *v.shape[1:]), 0, order).flatten(0, 1)
    groups = q.shape[2] // k.shape[2]
    out = torch.empty_like(q)
    for i, chunk in enumerate((rank, 2 * cp - 1 - rank)):
        end = (chunk + 1) * c
        q_i = q[i * c:(i + 1) * c].permute(1, 2, 0, 3)  # b h s d
        k_i = k_seq[:end].repeat_interleave(groups, dim=2).permute(1, 2, 3, 0)  # b h d s
        v_i = v_seq[:end].repeat_interleave(groups, dim=2).permute(1, 2, 0, 3)
        scores = torch.matmul(q_i, k_i) / q.shape[-1] ** 0.5
        query_pos = torch.arange(chunk * c, end, device=q.device).view(-1, 1)
        key_pos = torch.arange(end, device=q.device).view(1, -1)
        scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        out[i * c:(i + 1) * c].copy_(torch.matmul(torch.softmax(scores, dim=-1), v_i).permute(2, 0, 1, 3))
    return out


def check_plain(torch, dist, group, rank, q, k, v, out):
    """The plain attention's rows of this rank against causal attention over the whole sequence."""
    c = q.shape[0] // 2
    full = []
    for x in (q, k, v):
        parts = [torch.empty_like(x) for _ in range(2)]
        dist.all_gather(parts, x.detach().contiguous(), group=group)
        chunks = [parts[0][:c], parts[1][:c], parts[1][c:], parts[0][c:]]  # sequence chunks 0..3
        full.append(torch.cat(chunks))
    fq, fk, fv = full
    groups = q.shape[2] // k.shape[2]
    scores = torch.matmul(fq.permute(1, 2, 0, 3), fk.repeat_interleave(groups, dim=2).permute(1, 2, 3, 0))
    scores = scores / q.shape[-1] ** 0.5
    n = fq.shape[0]
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.matmul(torch.softmax(scores, dim=-1), fv.repeat_interleave(groups, dim=2).permute(1, 2, 0, 3))
    ref = ref.permute(2, 0, 1, 3)
    mine = torch.cat([ref[rank * c:(rank + 1) * c], ref[(3 - rank) * c:(4 - rank) * c]])
    return (out.detach() - mine).abs().max().item()


def worker(rank, args, port):
    import torch
    import torch.distributed as dist
    import torch.distributed.nn as dist_nn
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    group = dist.new_group([0, 1])
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    shape_q = (args.seq // 2, args.batch, args.heads, args.head_dim)
    shape_kv = (args.seq // 2, args.batch, args.kv_heads, args.head_dim)
    q = torch.randn(shape_q, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(shape_kv, device=device, dtype=dtype, requires_grad=True)
    v = torch.randn(shape_kv, device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn(shape_q, device=device, dtype=dtype)

    attention, which = None, "plain PyTorch"
    if cuda:
        try:
            import transformer_engine.pytorch as te
            attention = te.DotProductAttention(args.heads, args.head_dim, num_gqa_groups=args.kv_heads,
                                               attn_mask_type="causal", qkv_format="sbhd")
            attention.set_context_parallel_group(group, [0, 1], torch.cuda.Stream(), "all_gather")
            which = "TransformerEngine DotProductAttention, all_gather"
        except Exception as e:  # absent, or an API this script does not know
            print(f"cp-attention-check: TransformerEngine not used ({type(e).__name__}: {e})", file=sys.stderr)
    if attention is None:
        def attention(q_, k_, v_):
            return plain_cp_attention(torch, dist_nn, group, rank, q_, k_, v_)

    if args.check and which == "plain PyTorch":
        diff = check_plain(torch, dist, group, rank, q, k, v, attention(q, k, v))
        if rank == 0:
            print(f"cp-attention-check: the plain CP attention's rows match causal attention over the whole "
                  f"sequence to {diff:.2e}")
        if diff > (1e-2 if cuda else 1e-4):
            raise SystemExit(f"cp-attention-check: the plain CP attention differs by {diff} on rank {rank}")

    def layer_pass():
        with record_function("kareus:layer_op"):
            out = attention(q, k, v)
        with record_function("kareus:layer_op"):
            out.backward(grad.view(out.shape))

    for _ in range(2):  # warm up: allocator, communicators, kernels chosen
        layer_pass()
    if cuda:
        torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(args.passes):
            layer_pass()
        if cuda:
            torch.cuda.synchronize()
    if rank == 0:
        prof.export_chrome_trace(args.out)
        print(f"cp-attention-check: {args.passes} forward and backward passes of {which}, rank 0 of 2, "
              f"{args.device}: seq {args.seq}, batch {args.batch}, heads {args.heads}/{args.kv_heads}; "
              f"trace {args.out}")
    dist.barrier()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--passes", type=int, default=8)
    parser.add_argument("--check", action="store_true",
                        help="first compare the plain attention with causal attention over the whole sequence")
    # Defaults: one TP 4 rank of Llama 3.2 3B at CP 2, mbs 8, sequence 4096 on CUDA; small on CPU.
    parser.add_argument("--seq", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int)
    args = parser.parse_args()
    cuda = args.device == "cuda"
    args.seq = args.seq or (4096 if cuda else 256)
    args.batch = args.batch or (8 if cuda else 1)
    args.head_dim = args.head_dim or (128 if cuda else 32)
    if args.seq % 4 or args.heads % args.kv_heads:
        parser.error("--seq must split into 4 chunks and --heads into --kv-heads groups")
    try:
        import torch
        import torch.multiprocessing
    except ImportError:
        print("cp-attention-check: PyTorch is not installed here; nothing measured")
        return 0
    if not torch.distributed.is_available():
        print("cp-attention-check: this PyTorch has no torch.distributed; nothing measured")
        return 0
    if cuda and torch.cuda.device_count() < 2:
        print("cp-attention-check: fewer than two CUDA devices visible to PyTorch; nothing measured")
        return 0
    args.out = os.path.abspath(args.out)
    torch.multiprocessing.spawn(worker, args=(args, free_port()), nprocs=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
