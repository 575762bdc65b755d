#!/usr/bin/env bash
# timed.sh NAME COMMAND...: run a stage and print how long it took.
name=$1; shift
start=$EPOCHREALTIME
"$@"
status=$?
awk -v n="$name" -v s="$start" -v e="$EPOCHREALTIME" -v c="$status" \
  'BEGIN { printf "stage %-18s %8.1f s  (exit %d)\n", n, e - s, c }' >&2
exit $status
