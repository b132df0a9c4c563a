#!/usr/bin/env bash
# What the reviewer's confinement costs an ordinary launch (BENCHMARKS.md, "Confinement, all
# of it"): `launch --plan` of a rendered Gemini CLI plan with a shell stand-in speaking ACP
# (handshake, prompt, answer), side by side in one hyperfine run: OLD_BIN (a build before the
# sandbox and the cgroup were on by default), NEW_BIN as it launches by default (sandbox and
# cgroup best-effort), and NEW_BIN with both off; with MID_BIN, an intermediate build too (as
# it launches by default), between OLD_BIN and NEW_BIN.
#
#   scripts/bench-confinement.sh OLD_BIN NEW_BIN [MID_BIN]
#
# Needs hyperfine. Stand-ins are shell scripts; nothing else runs.
set -euo pipefail
old=${1:?usage: bench-confinement.sh OLD_BIN NEW_BIN}
new=${2:?usage: bench-confinement.sh OLD_BIN NEW_BIN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/worktree"
printf '%s\n' '#!/bin/sh' 'read -r _' \
  'printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":1}}"' \
  'read -r _' \
  'printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"sessionId\":\"s1\"}}"' \
  'read -r _' \
  'printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"stopReason\":\"end_turn\"}}"' \
  'sleep 0.05' > "$tmp/answers"
chmod 755 "$tmp/answers"
# Each build launches the plan it renders itself (plan versions differ between builds).
run() { # BIN [extra…]: the launch command of BIN
  local bin=$1 plan
  shift
  plan="$tmp/plan-$(printf '%s' "$bin" | md5sum | cut -c1-8).json"
  [ -f "$plan" ] || "$bin" render gemini --agent-id a1 --launch-dir "$tmp/launch" \
    --worktree "$tmp/worktree" --format plan > "$plan" 2> /dev/null
  echo "$bin launch --plan $plan --client-bin $tmp/answers --prompt review --timeout 30 $*"
}
# EXPORT=file.json: hyperfine's JSON (every run's time, for medians), as well.
export_args=()
if [ -n "${EXPORT:-}" ]; then export_args=(--export-json "$EXPORT"); fi
mid=()
if [ -n "${3:-}" ]; then mid=(-n "intermediate ($3)" "$(run "$3")"); fi
hyperfine --warmup 3 --runs "${RUNS:-40}" -N "${export_args[@]}" \
  --prepare "rm -rf $tmp/launch $tmp/.launch.kcap-lock" \
  -n before "$(run "$old")" \
  "${mid[@]}" \
  -n "now (sandbox, cgroup)" "$(run "$new")" \
  -n "now, both off" "$(run "$new" --sandbox off --cgroup off)"
