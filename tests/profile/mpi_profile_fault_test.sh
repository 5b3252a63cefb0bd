#!/usr/bin/env bash
# Faults of a fake-GPU profile on 4 MPI ranks (TP 2 x CP 2, 30 knobs), each followed by a rerun
# that must resume losing at most the knob in flight (the rerun measures exactly the knobs the
# journals lack, and the journals end with all 30, none twice):
#   - rank 2 dies (SIGKILL) inside its fourth knob's window;
#   - rank 1's GPU is lost in its fourth knob's window: that rank says so in one line, exit 3;
#   - rank 0's disk fills up (a file-size limit, SIGXFSZ ignored) while journalling: one line, exit 3;
#   - on one rank, the GPU lost mid-run: one line and exit 3 (before, every knob left was journalled as
#     failed and the run "succeeded");
#   - journals edited by hand: a garbled line, a whole garbled last line (exit 2, file untouched),
#     and a torn last line (dropped, resumed).
# Usage: mpi_profile_fault_test.sh KAREUS MPIEXEC
set -uo pipefail
kareus=$1
mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1

common=(profile --device fake --tp 2 --cp 2 --seq 8192 --partition fwd_mlp,fwd_qkv_ag --mode exhaustive
        --clocks 1210:1410:100 --sms 4,8 --slots 2 --window 2 --warmup 0.2 --cool-down 0.01)
total=30
fail() { echo "FAIL: $*"; exit 1; }

# Knobs the journals of OUT hold (their whole lines after the header; a torn last one is not one),
# checking that none is there twice.
journalled() {
  python3 - "$1" <<'PY'
import glob, json, sys
n = 0
for path in sorted(glob.glob(f"{sys.argv[1]}/*.journal.jsonl")):
    with open(path) as f:
        lines = [json.loads(l) for l in f.read().split("\n")[:-1] if l.strip()][1:]
    knobs = [(l["freq"], l["sm"], l["overlap_start"]) for l in lines]
    assert len(knobs) == len(set(knobs)), (path, "a knob journalled twice")
    assert all(l["status"] == "ok" for l in lines), (path, "a failed measurement journalled")
    n += len(knobs)
print(n)
PY
}

# Reruns OUT without faults on 4 ranks: it must measure exactly the knobs the journals lacked.
resume() {
  local out=$1 before
  before=$(journalled "$out") || fail "$out: bad journals"
  "$mpiexec" "${root[@]}" --oversubscribe -np 4 "$kareus" "${common[@]}" --out "$out" > "$out.rerun.log" 2>&1 \
    || { cat "$out.rerun.log"; fail "$out: the rerun failed"; }
  grep -q "^$((total - before)) knobs measured now" "$out.rerun.log" \
    || { cat "$out.rerun.log"; fail "$out: the rerun did not measure the $((total - before)) knobs left"; }
  [ "$(journalled "$out")" -eq "$total" ] || fail "$out: the journals do not end with all $total knobs"
  echo "$out: $before knobs journalled before the fault, $((total - before)) measured by the rerun"
}

# One line of ours on stderr saying what failed (Open MPI adds its own banner after a rank's end).
said_once() {
  local log=$1 pattern=$2 n
  n=$(grep -c -- "$pattern" "$log")
  [ "$n" -eq 1 ] || { cat "$log"; fail "$log: '$pattern' said $n times, not once"; }
}

# 1. Rank 2 is killed at its 8th energy reading: the end of its 4th knob's window (two readings a
#    knob), after the other ranks measured it. Knobs 1-3 are journalled; the 4th is in flight.
"$mpiexec" "${root[@]}" --oversubscribe -np 4 "$kareus" "${common[@]}" --fake-fault 2:total_energy@8:kill \
  --out "$dir/killed" > "$dir/killed.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] || { cat "$dir/killed.log"; fail "a run whose rank was killed exited 0"; }
[ "$(journalled "$dir/killed")" -eq 3 ] || fail "killed: expected the 3 knobs before the one in flight"
resume "$dir/killed"

# 2. Rank 1's GPU is lost at the end of its 4th knob's window: that rank says so and ends the run.
"$mpiexec" "${root[@]}" --oversubscribe -np 4 "$kareus" "${common[@]}" --fake-fault 1:total_energy@8:lost \
  --out "$dir/lost" > "$dir/lost.log" 2>&1
rc=$?
[ "$rc" -eq 3 ] || { cat "$dir/lost.log"; fail "a lost GPU on rank 1 exited $rc, not 3"; }
said_once "$dir/lost.log" "rank 1 failed measuring .*NVML_ERROR_GPU_IS_LOST"
[ "$(journalled "$dir/lost")" -eq 3 ] || fail "lost: expected the 3 knobs before the one in flight"
resume "$dir/lost"

# 3. Rank 0's disk is full: its files may not grow past 3 KiB, so a journal write fails part way
#    (the header and a handful of knobs fit). One line, exit 3, the journal cut back to whole lines.
#    Over TCP: Open MPI's shared-memory transport backs its segments with files the limit refuses.
OMPI_MCA_btl=self,tcp "$mpiexec" "${root[@]}" --oversubscribe -np 1 bash -c 'trap "" XFSZ; ulimit -f 3; exec "$@"' limited "$kareus" \
  "${common[@]}" --out "$dir/full" : -np 3 "$kareus" "${common[@]}" --out "$dir/full" > "$dir/full.log" 2>&1
rc=$?
[ "$rc" -eq 3 ] || { cat "$dir/full.log"; fail "a full disk exited $rc, not 3"; }
said_once "$dir/full.log" "kareus: error: .*journal.jsonl: write failed: File too large"
grep -q "a bug in kareus" "$dir/full.log" && fail "a full disk was reported as a bug"
tail -c 1 "$dir/full/fwd_mlp.journal.jsonl" | od -c | grep -q '\\n' || fail "full: the journal ends in a torn line"
resume "$dir/full"

# 4. One rank, its GPU lost at its 8th energy reading: the run stops there instead of journalling
#    every knob left as failed.
"$kareus" "${common[@]}" --fake-fault 0:total_energy@8:lost --out "$dir/one" > "$dir/one.log" 2>&1
rc=$?
[ "$rc" -eq 3 ] || { cat "$dir/one.log"; fail "a lost GPU on one rank exited $rc, not 3"; }
said_once "$dir/one.log" "kareus: error: .*NVML_ERROR_GPU_IS_LOST"
[ "$(journalled "$dir/one")" -eq 3 ] || fail "one: expected the 3 knobs before the one in flight"

# 5. Journals edited by hand, on the complete profile of 1.
out=$dir/killed
journal=$out/fwd_mlp.journal.jsonl
cp "$journal" "$dir/intact.jsonl"
python3 - "$journal" <<'PY'
import sys
p = sys.argv[1]
lines = open(p).read().splitlines(True)
lines[3] = lines[3][: len(lines[3]) // 2] + "\n"   # a line cut short by an editor, in the middle
open(p, "w").write("".join(lines))
PY
cp "$journal" "$dir/edited.jsonl"
"$mpiexec" "${root[@]}" --oversubscribe -np 4 "$kareus" "${common[@]}" --out "$out" > "$dir/edited.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { cat "$dir/edited.log"; fail "a garbled journal line exited $rc, not 2"; }
said_once "$dir/edited.log" "kareus: error: .*fwd_mlp.journal.jsonl:4: "
cmp -s "$journal" "$dir/edited.jsonl" || fail "the refused journal was changed"

python3 - "$dir/intact.jsonl" "$journal" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines(True)
lines[-1] = '{"freq": 1310, "overlap_start": "none", "sm": 4,\n'   # a whole last line, garbled
open(sys.argv[2], "w").write("".join(lines))
PY
cp "$journal" "$dir/edited.jsonl"
"$mpiexec" "${root[@]}" --oversubscribe -np 4 "$kareus" "${common[@]}" --out "$out" > "$dir/last.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { cat "$dir/last.log"; fail "a garbled whole last line exited $rc, not 2 (dropped?)"; }
said_once "$dir/last.log" "kareus: error: .*fwd_mlp.journal.jsonl:16: .*fix or delete line 16"
cmp -s "$journal" "$dir/edited.jsonl" || fail "the refused journal was changed"

# A torn last line (no newline, as a crash leaves it) is dropped with a warning; the rerun measures it.
python3 - "$dir/intact.jsonl" "$journal" <<'PY'
import sys
text = open(sys.argv[1]).read()
last = text.rstrip("\n").rsplit("\n", 1)[1]
open(sys.argv[2], "w").write(text[: len(text) - len(last) - 1] + last[:40])
PY
resume "$out"
grep -q "dropping a torn last line" "$out.rerun.log" || fail "the torn line was not said"
echo "ok"
