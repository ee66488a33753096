#!/usr/bin/env bash
# Capture real GPU node outputs for tests/fixtures/gpu/ (run on a GPU machine; writes into $OUT or ./out).
set -u
out="${OUT:-./out}"
mkdir -p "$out"
run() { local name="$1"; shift; echo "== $name: $*"; timeout "${CAP:-60}" "$@" >"$out/$name" 2>"$out/$name.stderr"; echo "rc=$?" >>"$out/$name.stderr"; }
run nvidia-smi-q-x.xml nvidia-smi -q -x
run nvidia-smi-q.txt nvidia-smi -q
run nvidia-smi-topo-m.txt nvidia-smi topo -m
run nvidia-smi-nvlink-s.txt nvidia-smi nvlink -s
run nvidia-smi-version.txt nvidia-smi --version
run uname.txt uname -a
command -v dcgmi && { CAP=150 run dcgmi-diag-r1.json dcgmi diag -r 1 -j; CAP=150 run dcgmi-diag-r1.txt dcgmi diag -r 1; }
command -v nv-hostengine && echo has-hostengine
command -v ibstat && run ibstat.txt ibstat
command -v ibv_devinfo && run ibv_devinfo.txt ibv_devinfo
run dmesg-xid.txt sh -c 'dmesg 2>&1 | grep -i -E "xid|NVRM" | tail -50'
ls /usr/bin | grep -i -E "dcgm|nccl|ib_|all_reduce" > "$out/tools.txt" 2>&1
echo done
