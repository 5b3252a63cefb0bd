#!/usr/bin/env python3
"""Derives the power model of the spec-sheet-only GPU presets (A40, H100, H200) from the A100's.

Nothing here is fitted to a measurement of those GPUs. Each takes the calibrated A100 silicon's
dimensionless structure (data/gpus/a100-sxm4-40gb.json, fitted to Perseus's measured A100 stage
profiles by `kareus hw fit`): the voltage knee at the same fraction of the max clock (on the nearest
supported clock), the same V_min/V_max, C_idle/C_compute and C_copy/C_compute, and the same ratio of
full-load power at the max clock to the board's TDP. That last ratio is why boards throttle: the
A100 at 1410 MHz with every SM at GEMM peak would draw about 1.6x its 400 W TDP, so the driver's
power limit, not the clock, sets the speed of GEMM-bound work near the top clocks.

Run in the repository root: python3 scripts/spec_gpu_presets.py (rewrites the three files).
"""
import json
from collections import OrderedDict

def full_load_w(g, c_compute_nf):
    p = g["power_model"]
    idle = p["idle_sm_capacitance_nf"] / p["compute_capacitance_nf"]
    f = g["sm_clocks_mhz"]["max"]
    hbm_w = g["hbm_bandwidth_gb_per_s"] * 1e9 * p["hbm_pj_per_byte"] * 1e-12
    return g["static_power_w"] + c_compute_nf * (1 + idle) * p["v_max_v"] ** 2 * f * 1e-3 + hbm_w

def six(x):
    return float(f"{x:.6g}")

def main():
    a100 = json.load(open("data/gpus/a100-sxm4-40gb.json"), object_pairs_hook=OrderedDict)
    ap = a100["power_model"]
    ratio = full_load_w(a100, ap["compute_capacitance_nf"]) / a100["tdp_w"]
    knee_fraction = ap["knee_clock_mhz"] / a100["sm_clocks_mhz"]["max"]
    v_ratio = ap["v_min_v"] / ap["v_max_v"]
    idle_ratio = ap["idle_sm_capacitance_nf"] / ap["compute_capacitance_nf"]
    copy_ratio = ap["copy_capacitance_nf"] / ap["compute_capacitance_nf"]
    for name in ["a40", "h100-sxm", "h200"]:
        path = f"data/gpus/{name}.json"
        g = json.load(open(path), object_pairs_hook=OrderedDict)
        p = g["power_model"]
        c = g["sm_clocks_mhz"]
        knee = c["min"] + round((knee_fraction * c["max"] - c["min"]) / c["step"]) * c["step"]
        p["knee_clock_mhz"] = knee
        p["v_min_v"] = six(v_ratio * p["v_max_v"])
        # Full load at max clock = ratio x TDP, solved for C_compute (power is affine in it).
        p["compute_capacitance_nf"] = 1.0
        p["idle_sm_capacitance_nf"] = idle_ratio
        base = full_load_w(g, 0.0)
        per_nf = full_load_w(g, 1.0) - base
        cc = six((ratio * g["tdp_w"] - base) / per_nf)
        p["compute_capacitance_nf"] = cc
        p["idle_sm_capacitance_nf"] = six(idle_ratio * cc)
        p["copy_capacitance_nf"] = six(copy_ratio * cc)
        g.setdefault("power_limit_w", g["tdp_w"])
        g.move_to_end("power_limit_w")
        # Keep the file's field order: power_limit_w after tdp_w.
        ordered = OrderedDict()
        for k, v in g.items():
            if k == "power_limit_w":
                continue
            ordered[k] = v
            if k == "tdp_w":
                ordered["power_limit_w"] = g["power_limit_w"]
        with open(path, "w") as out:
            json.dump(ordered, out, indent=2)
            out.write("\n")
        print(f"{name}: knee {knee} MHz, V_min {p['v_min_v']} V, C_compute {cc} nF, "
              f"full load at max clock {ratio:.3f} x TDP = {ratio * g['tdp_w']:.0f} W")

if __name__ == "__main__":
    main()
