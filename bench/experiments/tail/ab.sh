#!/bin/bash
# Interleaved A/B of two builds (package roots) with windows.js: starts a throwaway redis-server, runs PAIRS pairs of
# SECONDS_MS ms per scenario at c=50, order alternating per pair, and prints "<scenario> base|new <json>" per run.
# RUNTIME=<path> runs windows.js with another runtime (node_modules/.bin/bun: without the direct connection).
# A REDIS_URL given (with TLS_CA for a rediss:// one, see windows.js) is used instead of a throwaway server.
# usage: bench/experiments/tail/ab.sh BASE_PKG NEW_PKG PAIRS SECONDS_MS scenario...
BASE=$1; NEW=$2; PAIRS=$3; MS=$4; shift 4
if [ -z "$REDIS_URL" ]; then
  PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  redis-server --port $PORT --save '' --appendonly no --daemonize yes --logfile /dev/null >/dev/null
  sleep 0.5
  export REDIS_URL=redis://127.0.0.1:$PORT
fi
cd "$(dirname "$0")/../../.."
for sc in "$@"; do
  for i in $(seq 1 $PAIRS); do
    if [ $((i % 2)) = 1 ]; then order="base new"; else order="new base"; fi
    for w in $order; do
      if [ $w = base ]; then P=$BASE; else P=$NEW; fi
      r=$(PKG=$P ${RUNTIME:-node} bench/experiments/tail/windows.js $sc 50 $MS)
      echo "$sc $w $r"
    done
  done
done
if [ -n "$PORT" ]; then redis-cli -p $PORT shutdown nosave >/dev/null 2>&1; fi
