"""`kareus export --format zeus-pfo` served by Zeus's own PFO scheduler.

Real `kareus plan` runs (the default job, TP 8 x PP 2, and TP 2 x PP 4 x DP 2) are exported and the
file is handed to the schedulers of Zeus's PFO server (zeus.optimizer.pipeline_frequency.server.
scheduler, PyPI `zeus`), chosen by ZEUS_PFO_SCHEDULER as docs/formats.md starts the server: `PointSolution`, which `eval`s the file as a list of per-rank lists of
(instruction, MHz) and checks that it has one list per rank, and `PointSolution3D`, which runs it
per pipeline stage and copies a stage's list to every rank of that stage. Each rank's schedule is
sent to the client as JSON and read back with Zeus's `FrequencySchedule`, as its client does; it
must be the plan's instructions of that rank's stage, in run order, with the plan's clocks, named
as Zeus's client calls them (forward, backward).

Usage: zeus_pfo_real.py KAREUS_BINARY SCRATCH_DIR (with zeus importable; zeus_pfo_test.sh sets
that up).
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import types
import unittest

# Zeus's pipeline_frequency package imports its training-side client (and with it PyTorch) on
# import; the server's scheduler and the shared message types need neither. The package is entered
# without its __init__, and its own common.py and server/scheduler.py are imported as they are.
_optimizer = importlib.util.find_spec("zeus.optimizer")
_package = types.ModuleType("zeus.optimizer.pipeline_frequency")
_package.__path__ = [os.path.join(os.path.dirname(_optimizer.origin), "pipeline_frequency")]
sys.modules[_package.__name__] = _package

from zeus.optimizer.pipeline_frequency.common import FrequencySchedule, JobInfo, PFOServerSettings, RankInfo  # noqa: E402

KAREUS = sys.argv[1] if len(sys.argv) > 1 else "build/kareus"
SCRATCH = sys.argv[2] if len(sys.argv) > 2 else "/tmp/kareus-zeus-pfo"


def kareus(*args):
    done = subprocess.run([KAREUS, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"kareus {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done


def megatron_ranks(tp, pp, dp, frequencies):
    """Zeus's RankInfo for every rank, laid out as Megatron-LM does (TP fastest, then DP, then PP)."""
    infos = []
    for rank in range(tp * pp * dp):
        infos.append(RankInfo(rank=rank, tp_rank=rank % tp, dp_rank=(rank // tp) % dp, pp_rank=rank // (tp * dp),
                              available_frequencies=frequencies))
    return infos


class ZeusPfo(unittest.TestCase):
    def export(self, name, tp, pp, dp, flags):
        out = os.path.join(SCRATCH, name)
        shutil.rmtree(out, ignore_errors=True)
        kareus("plan", "--tp", str(tp), "--pp", str(pp), "--dp", str(dp), *flags, "--out", out)
        kareus("export", "--plan", os.path.join(out, "plan.json"), "--format", "zeus-pfo", "--out", out)
        with open(os.path.join(out, "plan.json")) as f:
            plan = json.load(f)
        return plan, os.path.join(out, "freqs_pipeline_00000.py")

    def serve(self, scheduler, tp, pp, dp, path, frequencies):
        """The schedules the server hands out, set up as docs/formats.md says (environment variables)
        and the scheduler made as Zeus's job manager makes it."""
        os.environ["ZEUS_PFO_SCHEDULER"] = scheduler
        os.environ["ZEUS_PFO_SCHEDULER_ARGS"] = json.dumps({"solution_path": path})
        settings = PFOServerSettings()
        job = JobInfo(pp_degree=pp, dp_degree=dp, tp_degree=tp, world_size=tp * pp * dp)
        ranks = megatron_ranks(tp, pp, dp, frequencies)
        served = settings.scheduler(job, ranks, settings, **settings.scheduler_args).next_schedule()
        return ranks, served

    def check_job(self, name, tp, pp, dp, flags=()):
        plan, path = self.export(name, tp, pp, dp, list(flags))
        self.assertEqual(len(plan["stages"]), pp)
        clocks = sorted({round(i["freq_mhz"]) for s in plan["stages"] for i in s["instructions"]})
        ranks, served = self.serve("PointSolution3D", tp, pp, dp, path, clocks)
        self.assertEqual(sorted(s.rank for s in served), list(range(tp * pp * dp)))
        pp_rank = {r.rank: r.pp_rank for r in ranks}
        for schedule in served:
            # What the server sends and the client reads (FrequencySchedule.parse_raw of the reply).
            received = FrequencySchedule.parse_raw(schedule.json())
            self.assertEqual(received.rank, schedule.rank)
            stage = plan["stages"][pp_rank[schedule.rank]]["instructions"]
            self.assertEqual([tuple(x) for x in received.frequencies],
                             [(i["type"], round(i["freq_mhz"])) for i in stage], f"rank {schedule.rank}")
            for instruction, mhz in received.frequencies:
                self.assertIn(instruction, ("forward", "backward"))
                self.assertIn(mhz, clocks)
        # Zeus types a frequency as int and its client hands it to NVML as it is: no float in the file.
        with open(path) as f:
            literal = eval(f.read())  # as PointSolution reads it
        self.assertTrue(all(type(mhz) is int for stage in literal for _, mhz in stage))
        return path

    def test_default_job(self):
        path = self.check_job("default", 8, 2, 1)
        # Zeus's plain PointSolution wants one list per rank: with TP > 1 it refuses the per-stage
        # file, as docs/formats.md says (run the server with PointSolution3D).
        with self.assertRaisesRegex(RuntimeError, "assumes 2 ranks"):
            self.serve("PointSolution", 8, 2, 1, path, [1410])

    def test_more_stages_and_data_parallel(self):
        self.check_job("tp2-pp4-dp2", 2, 4, 2, ["--layers-per-stage", "7,7,7,7", "--checkpointing", "none"])

    def test_pure_pipeline_parallel(self):
        # TP 1 x DP 1: one rank per stage, which the plain PointSolution serves as it is.
        plan, path = self.export("tp1", 1, 4, 1, ["--layers-per-stage", "7,7,7,7"])
        _, served = self.serve("PointSolution", 1, 4, 1, path, [1410])
        for schedule in served:
            self.assertEqual([tuple(x) for x in schedule.frequencies],
                             [(i["type"], round(i["freq_mhz"])) for i in plan["stages"][schedule.rank]["instructions"]])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
