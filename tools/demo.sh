#!/bin/sh
# The main job end to end on the bundled (synthetic) sample trial:
# check configs → inspect the trial → identify the athlete → synthesize the gesture →
# drive the simulated bench with it (assisted at 64 %: the gesture peaks at ≈ 184 N·m per
# shoulder; the athlete then produces 0.36 × 184 ≈ 66 N·m, under her 70 N·m limit, and the bench
# 0.64 × 184 ≈ 118 N·m, under its 120 N·m — configs/bench.toml; preflight refuses any load
# outside 62–65 %) → replay the session.
# Everything is written under out/.
set -eu
bin=.venv/bin
out=out
mkdir -p "$out"
step() { printf '\n== %s\n' "$*"; }

step "bemore $($bin/bemore --version | sed 's/.*version //'): checking the bundled configuration"
$bin/bemore config check
step "bemore trial inspect data/sample_trial.c3d (a synthetic trial, see data/README.md)"
$bin/bemore trial inspect data/sample_trial.c3d --out "$out/trial"
step "bemore identify: Grey Wolf Optimizer, 200 wolves x 50 iterations (the seed protocol), then a least-squares polish"
$bin/bemore identify data/sample_trial.c3d --polish --out "$out/identify"
step "bemore synthesize: the least-torque clear hip circle for this athlete"
$bin/bemore synthesize "$out/identify/athlete.json" --out "$out/gesture"
step "bemore drive: the gesture on the simulated bench (the firmware's own C code behind a pty)"
$bin/bemore drive "$out/gesture/setpoints.csv" --mode assistive --load 64 \
    --log "$out/session.jsonl" --no-view
step "bemore replay: the session's summary and plots"
$bin/bemore replay "$out/session.jsonl" --plot "$out/replay"
printf '\nAll outputs are in %s/.\n' "$out"
