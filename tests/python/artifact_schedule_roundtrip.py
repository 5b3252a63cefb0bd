"""Round trip of `kareus export --format kareus-artifact` through the artifact's schedule grammar.

For real `kareus plan` runs (TP only and CP, with and without full checkpointing) the exported
scheds_pipeline_00000.py is read with a reader written here from the grammar of the Kareus
artifact's scheduler (ml-energy/kareus, kareus/scheduler/parser.py): a Python list literal, per
pipeline stage a list of instruction tuples ('forward', ...) / ('backward', ...) with full
checkpointing, else of ((forward...), (backward...)) pairs per microbatch; each field a config
string <overlap_start>-<overlap_end>-<SMs>-<threads per block>. Every field must equal the knob the
plan gives that partition, and the freqs file must equal the plan's clocks.

Usage: artifact_schedule_roundtrip.py KAREUS_BINARY SCRATCH_DIR
"""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

TP_FORWARD = ["fwd_attn", "fwd_mlp"]
TP_BACKWARD = ["bwd_attn", "bwd_mlp"]
CP_FORWARD = ["fwd_qkv_ar", "fwd_qkv_ag", "fwd_ao_ag", "fwd_ao_ar", "fwd_mlp"]
CP_BACKWARD = ["bwd_qkv_ar", "bwd_qkv_rs", "bwd_a_rs", "bwd_a_ag", "bwd_o_ag", "bwd_o_ar", "bwd_mlp"]

KAREUS = sys.argv[1] if len(sys.argv) > 1 else "build/kareus"
SCRATCH = sys.argv[2] if len(sys.argv) > 2 else "/tmp/kareus-artifact-roundtrip"


def parse_config(text):
    """(start, end, sms, block) of a config string, either form of the grammar."""
    legacy = re.fullmatch(r"(-?\d+)-(-?\d+)-(-?\d+)-(-?\d+)", text)
    if legacy:
        return tuple(int(g) for g in legacy.groups())
    window, sms, block = text.rsplit("-", 2)
    start, end = window.split("-", 1)
    return (start, end, int(sms), int(block))


def read_schedule(text, checkpointing, cp):
    """Per stage, per instruction in the file's order: {field: config} with the instruction name."""
    forward, backward = (CP_FORWARD, CP_BACKWARD) if cp else (TP_FORWARD, TP_BACKWARD)
    parsed = ast.literal_eval(text)
    assert isinstance(parsed, list), "top level must be a list"
    stages = []
    for per_rank in parsed:
        assert isinstance(per_rank, list), "each stage must be a list"
        items = []
        if checkpointing:
            for tup in per_rank:
                assert isinstance(tup, tuple) and tup, tup
                if tup[0] == "forward":
                    assert len(tup) == 1 + len(forward), tup
                    items.append(("forward", dict(zip(forward, map(parse_config, tup[1:])))))
                elif tup[0] == "backward":
                    assert len(tup) == 1 + len(forward) + len(backward), tup
                    items.append(("backward", dict(zip(forward + backward, map(parse_config, tup[1:])))))
                else:
                    raise AssertionError(f"unknown instruction {tup[0]!r}")
        else:
            for pair in per_rank:
                assert isinstance(pair, tuple) and len(pair) == 2, pair
                fwd, bwd = pair
                assert fwd[0] == "forward" and len(fwd) == 1 + len(forward), fwd
                assert bwd[0] == "backward" and len(bwd) == 1 + len(backward), bwd
                items.append(("forward", dict(zip(forward, map(parse_config, fwd[1:])))))
                items.append(("backward", dict(zip(backward, map(parse_config, bwd[1:])))))
        stages.append(items)
    return stages


def artifact_slot(ours):
    family, _, index = ours.rpartition("_")
    return f"activation_{index}" if family == "act" else ours


def expected_fields(instruction):
    """{field: config} the plan's knob asks for: forward keys of a recompute, then its own."""
    fields = {}
    for part in ("recompute", "partitions"):
        for p in instruction["knob"].get(part, []):
            assert p["key"] not in fields, p
            fields[p["key"]] = (artifact_slot(p["slot"]), "none", p["sms"], 1024)
    return fields


def kareus(*args):
    done = subprocess.run([KAREUS, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"kareus {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done


class RoundTrip(unittest.TestCase):
    def check_job(self, name, flags, checkpointing, cp):
        out = os.path.join(SCRATCH, name)
        shutil.rmtree(out, ignore_errors=True)
        kareus("plan", *flags, "--out", out)
        kareus("export", "--plan", os.path.join(out, "plan.json"), "--format", "kareus-artifact", "--out", out)
        with open(os.path.join(out, "plan.json")) as f:
            plan = json.load(f)
        with open(os.path.join(out, "scheds_pipeline_00000.py")) as f:
            stages = read_schedule(f.read(), checkpointing, cp)
        with open(os.path.join(out, "freqs_pipeline_00000.py")) as f:
            freqs = ast.literal_eval(f.read())
        self.assertEqual(len(stages), len(plan["stages"]))
        compared = 0
        for s, stage in enumerate(plan["stages"]):
            instructions = stage["instructions"]
            self.assertEqual([(i["type"], round(i["freq_mhz"])) for i in instructions],
                             [tuple(x) for x in freqs[s]])
            if checkpointing:
                planned = instructions
            else:  # pairs per microbatch: forward then backward of microbatch 0, 1, ...
                planned = sorted(instructions, key=lambda i: (i["microbatch"], i["type"] != "forward"))
            self.assertEqual(len(stages[s]), len(planned))
            for (kind, fields), ins in zip(stages[s], planned):
                self.assertEqual(kind, ins["type"])
                self.assertEqual(fields, expected_fields(ins), f"stage {s} microbatch {ins['microbatch']} {kind}")
                compared += len(fields)
        self.assertGreater(compared, 0)
        return compared

    def test_tp_checkpointed(self):
        self.check_job("tp-full", [], True, False)

    def test_tp_without_checkpointing(self):
        self.check_job("tp-none", ["--checkpointing", "none"], False, False)

    def test_cp_checkpointed(self):
        self.check_job("cp-full", ["--tp", "4", "--cp", "2"], True, True)

    def test_cp_without_checkpointing(self):
        self.check_job("cp-none", ["--tp", "4", "--cp", "2", "--checkpointing", "none"], False, True)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
