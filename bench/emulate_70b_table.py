"""The tables of bench/emulate_70b.sh from the compare.json files it writes.

Iso-time: each method's least energy at a time no longer than Megatron-LM's; iso-energy: its
fastest time at an energy no higher than Megatron-LM's. Energies of one GPU per stage unless said
to cover the whole job (every GPU: TP x CP x PP x DP)."""
import json
import sys

TOLERANCE = 1e-8  # relative; frontier times agree with Megatron-LM's to rounding


def pct(value):
    return "" if value is None else f"{value:.1f}%"


def main(out, names):
    configs = [(n, json.load(open(f"{out}/{n}/compare.json"))["configs"][0]) for n in names]
    print("Llama 3.3 70B, TP 8, 16 data-parallel pipelines, mbs 4, seq 4096, 64 microbatches, full checkpointing, "
          "layers split evenly; costs from the simulated A100 SXM4 40GB (a model, not a measurement). Regenerate "
          "with bench/emulate_70b.sh. Energies of one GPU per stage unless marked as the whole job (every GPU, "
          "TP x CP x PP x DP). Interleaved chunks have options of their own (the embedding in the first chunk of "
          "the first stage, the LM head in the last chunk of the last); ZB-H1's W (the weight-gradient GEMMs) has "
          "clocks of its own, B is the backward less W at the same clock and knobs.")
    print()
    for name, c in configs:
        print(f"- {name}: {c['config']}; {c['cluster_energy_scope']}")
        for left in c.get("left_out", []):
            print(f"  ({left['method']} left out: {left['reason']})")
    print()
    print("| config | method | fastest time (s) | energy at Megatron's time (kJ) | iso-time energy reduction "
          "| whole job at Megatron's time (MJ) | iso-energy time reduction |")
    print("|---|---|---|---|---|---|---|")
    for name, c in configs:
        methods = {m["method"]: m for m in c["methods"]}
        megatron = methods["Megatron-LM"]
        t_ref, e_ref = megatron["max_throughput_time_s"], megatron["max_throughput_energy_j"]
        for m in c["methods"]:
            within = [e for t, e in m["frontier"] if t <= t_ref * (1 + TOLERANCE)]
            cheaper = [t for t, e in m["frontier"] if e <= e_ref * (1 + TOLERANCE)]
            e_iso = min(within) if within else None
            t_iso = min(cheaper) if cheaper else None
            whole = e_iso * m["cluster_energy_j"] / m["max_throughput_energy_j"] / 1e6 if e_iso else None
            print(f"| {name} | {m['method']} | {m['max_throughput_time_s']:.2f} | "
                  f"{'' if e_iso is None else f'{e_iso / 1e3:.1f}'} | {pct(None if e_iso is None else 100 * (1 - e_iso / e_ref))} | "
                  f"{'' if whole is None else f'{whole:.2f}'} | {pct(None if t_iso is None else 100 * (1 - t_iso / t_ref))} |")
    print()
    print("Stragglers: one of the 16 pipelines slower by the factor; the whole job's energy per iteration (MJ, "
          "every GPU) with the others on the least-energy plan that meets its time, and the saving against them "
          "waiting on their fastest plan.")
    print()
    slowdowns = [s["slowdown"] for s in configs[0][1]["methods"][0]["stragglers"]]
    print("| config | method | " + " | ".join(f"x{s:g}" for s in slowdowns) + " |")
    print("|---|---|" + "---|" * len(slowdowns))
    for name, c in configs:
        for m in c["methods"]:
            cells = [f"{s['cluster_energy_j'] / 1e6:.2f} ({s['saving_pct']:.1f}%)" for s in m["stragglers"]]
            print(f"| {name} | {m['method']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
