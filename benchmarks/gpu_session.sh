#!/usr/bin/env bash
# The prepared GPU session, one command on one lent GPU (its step limits add up to 710 s; not yet run on a GPU, so these are limits, not measured times): the paper-shape efficiency study in bf16 (workflows/studies/paper_shape_gpu.yaml),
# after a seconds-long smoke of the same code on the GPU, then yocou.evaluation.bench.gpu_check (bf16 correctness against
# fp32 and the full forward, and the profiler's CUDA path at 1.3B). Writes to $OUT (default /tmp/gpu_session):
#   raw.json, measure.log      -> results/paper_shape_gpu/ (then `snakemake --cores 2 efficiency_paper_shape`)
#   gpu_check.tar.gz           -> results/gpu_check/ (its json, profile, tidy table and Figure 7 at GPU scale)
#   train_step.tar.gz          -> the training step's kernels, flex against sdpa, tokens/s, MFU, peak memory
#   session.log                the GPU, the smoke, every step's exit status
# Usage: bash benchmarks/gpu_session.sh   (from the repository root; needs torch with CUDA, pandas, PyYAML)
# Not yet run on a GPU: its CUDA paths (device generator, synchronised clocks, bf16 limits) are exercised on the CPU
# only (tests/test_paper_shape.py runs the study in bf16 at smoke shapes); step 1 is there to catch what they miss.
set -u -o pipefail
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
log="$OUT/session.log"
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv;
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"; } >"$log" 2>&1
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS; timeout "$limit" "$@"; local rc=$?
         echo "step $name: exit $rc after $((SECONDS - t0)) s" >>"$log"; return $rc; }
# 1. the study's code at smoke shapes on the GPU (bf16, CUDA generator, synchronised clocks): seconds
step smoke 60 python3 - >>"$log" 2>&1 <<'PY'
from yocou.evaluation.bench import paper_shape as PS
cfgs = PS.paper_shape_configs("workflows/config/smoke.yaml")
sc = PS.study_config_from_dict(dict(decode_lens=[64, 128], prefill_lens=[48, 96], n_decode=4, repeats_decode=2,
                                    repeats_prefill=2, repeats_check=2, chunk_size=32, triad_elems=1 << 20,
                                    matmul_n=256, limit_repeats=2, device="cuda", dtype="bf16"))
d = PS.run_study(cfgs, sc, "/tmp/ps_smoke.json", log=print)
from yocou.results.summarize.paper_shape import summarize_paper_shape
df = summarize_paper_shape("/tmp/ps_smoke.json")
print("smoke ok:", len(d["rows"]), "rows,", len(df), "tidy rows;", df["device_label"].iloc[0])
PY
# 2. the study at the paper's shape
step study 300 python3 -m yocou.evaluation.bench.paper_shape --paper-config workflows/config/paper.yaml \
    --study-config workflows/studies/paper_shape_gpu.yaml --out "$OUT/raw.json" 2>"$OUT/measure.log"
[ -f "$OUT/raw.json.partial.json" ] && echo "study incomplete: partial result kept" >>"$log"
# 3. the training step: attention kernels, flex against sdpa forward and backward, the 1.3B YOCO-U at 8192 tokens in
#    bf16, eager and per-layer compiled: tokens/s, MFU, peak memory against the planner (yocou.evaluation.bench.train_step)
step train_step 150 python3 -m yocou.evaluation.bench.train_step --out /tmp/train_step >>"$log" 2>&1
tar -C /tmp -czf "$OUT/train_step.tar.gz" train_step 2>>"$log"
# 4. the GPU check (its own profile of every variant at 1.3B)
step gpu_check 200 python3 -m yocou.evaluation.bench.gpu_check --out /tmp/gpu_check >>"$log" 2>&1
tar -C /tmp -czf "$OUT/gpu_check.tar.gz" gpu_check 2>>"$log"
date -u >>"$log"
