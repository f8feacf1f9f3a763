#!/bin/sh
# The main job end to end on the bundled (synthetic) sample trial:
# check configs → inspect the trial → identify the athlete → synthesize the gesture →
# print the modes, loads and speeds the bench and the athlete can take → drive the simulated
# bench with it in the default mode (passive: the bench gives the whole gesture's torque, which
# controller/configs/bench.toml is sized for) → replay the session.
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
step "bemore identify: her body scaled from the segment table, Grey Wolf Optimizer 200 wolves x 50 iterations (the seed protocol), then a least-squares polish; the fit judged against the trial's noise"
$bin/bemore identify data/sample_trial.c3d --body-mass 41.1 --out "$out/identify"
step "bemore synthesize: the least-torque clear hip circle for this athlete"
$bin/bemore synthesize "$out/identify/athlete.json" --out "$out/gesture"
step "bemore drive --plan: what the bench and the athlete can take of this gesture"
$bin/bemore drive "$out/gesture/setpoints.csv" --plan
step "bemore drive: the gesture on the simulated bench (the firmware's own C code behind a pty)"
rm -f "$out/session.jsonl"  # the demo's previous session: drive never overwrites a log
$bin/bemore drive "$out/gesture/setpoints.csv" --log "$out/session.jsonl" --no-view
step "bemore replay: the session's summary and plots"
$bin/bemore replay "$out/session.jsonl" --plot "$out/replay"
printf '\nAll outputs are in %s/.\n' "$out"
