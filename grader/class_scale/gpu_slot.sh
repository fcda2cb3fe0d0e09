#!/usr/bin/env bash
# gpu_slot.sh — run one command on a free GPU slot of this host (grader/class_scale/slots.py
# explains slots; the Gradescope bridge's direct runner uses this, batch.py the Python twin).
#
#   gpu_slot.sh [--gpus N|LIST] [--lock PREFIX] -- CMD [ARG...]
#
# Tries the lock file PREFIX.gpu<ID> of every GPU in turn (util-linux `flock -n`); the first free
# one runs CMD with CUDA_VISIBLE_DEVICES=<ID>; all busy: waits $GLMASR_GPU_SLOT_POLL seconds
# (default 1) and tries again, for as long as it is let run (the caller's `timeout` bounds it).
# `flock -o` holds the lock in the flock process, not in CMD: nothing CMD starts (a student's
# program) inherits the lock's descriptor, and the lock ends when flock does, however it ends.
# --gpus: N means GPUs 0..N-1, or a comma list of ids; default the ids of $CUDA_VISIBLE_DEVICES,
# else as many as `nvidia-smi -L` lists, else one. --lock: default /tmp/glmasr-gpu-slots-<uid>/gpu,
# in a folder that must be this user's own and closed to others (slots.py says why).
# Exit: CMD's; 5 a bad call. Says "gpu_slot: GPU <ID>" on stderr when CMD starts.
set -uo pipefail

gpus="" lock="/tmp/glmasr-gpu-slots-$(id -u)/gpu" poll="${GLMASR_GPU_SLOT_POLL:-1}"
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus) gpus="${2:-}"; shift 2 ;;
    --lock) lock="${2:-}"; shift 2 ;;
    --) shift; break ;;
    *) echo "gpu_slot: unknown argument $1" >&2; exit 5 ;;
  esac
done
[ $# -gt 0 ] || { echo "gpu_slot: no command" >&2; exit 5; }
if [ -z "$gpus" ]; then
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    gpus="$CUDA_VISIBLE_DEVICES,"
  else
    n="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
    gpus="${n:-0}"
    [ "$gpus" -ge 1 ] 2>/dev/null || gpus=1
  fi
fi
if [[ "$gpus" =~ ^[0-9]+$ ]]; then
  ids=()
  for ((i = 0; i < gpus; i++)); do ids+=("$i"); done
else
  IFS=, read -r -a ids <<< "$gpus"
fi
[ "${#ids[@]}" -gt 0 ] || { echo "gpu_slot: no GPU in --gpus '$gpus'" >&2; exit 5; }
folder="$(dirname "$lock")"
mkdir -p -m 700 "$folder" || exit 5
if [ -L "$folder" ] || [ "$(stat -c '%u %a' "$folder")" != "$(id -u) 700" ]; then
  echo "gpu_slot: $folder: the GPU slots' folder is not this user's own, closed to others ($(stat -c 'owner uid %u, mode %a' "$folder")): remove it, or choose another --lock" >&2
  exit 5
fi

while true; do
  for id in "${ids[@]}"; do
    [ -n "$id" ] || continue
    slot="$lock.gpu$id"
    # 75 (EX_TEMPFAIL) only when the slot is taken: CMD's own 75 is passed on as 1.
    CUDA_VISIBLE_DEVICES="$id" flock -n -o -E 75 "$slot" bash -c \
      'echo "gpu_slot: GPU $CUDA_VISIBLE_DEVICES" >&2; "$@"; rc=$?; exit $((rc == 75 ? 1 : rc))' \
      gpu_slot "$@"
    rc=$?
    [ "$rc" -eq 75 ] || exit "$rc"
  done
  sleep "$poll"
done
