#!/bin/sh
# The GPU host's side of benchmarks/gpu_bundle.sh (see there). Two steps:
#
#   sh benchmarks/gpu_host_setup.sh append PART   # each part in order, into /tmp/gpu-bundle.tar
#   sh benchmarks/gpu_host_setup.sh install DIR   # checks the bundle against DIR/md5, installs
#                                                 # it into /tmp/site, writes /tmp/site/env.sh
#   . /tmp/site/env.sh                            # PYTHONPATH, LD_LIBRARY_PATH for this shell
#
# The CUDA and cuDNN libraries are the host's pip packages (nvidia/cu13, nvidia/cudnn), found
# through the host Python's `nvidia` namespace package and put on LD_LIBRARY_PATH.
set -eu
BUNDLE=/tmp/gpu-bundle.tar
SITE=/tmp/site
case "${1:-}" in
append)
    cat "$2" >> "$BUNDLE"
    echo "gpu_host_setup: $(stat -c %s "$BUNDLE") bytes so far"
    ;;
install)
    got=$(md5sum < "$BUNDLE" | cut -d' ' -f1)
    want=$(cat "$2/md5")
    [ "$got" = "$want" ] || { echo "gpu_host_setup: bundle md5 $got, expected $want" >&2; exit 1; }
    unpacked=$(mktemp -d)
    tar -xf "$BUNDLE" -C "$unpacked"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$unpacked"/deps/*.whl
    tar -xJf "$unpacked/ort_rest.tar.xz" -C "$SITE"
    xz -dc "$unpacked/provider.so.xz" > "$SITE/onnxruntime/capi/libonnxruntime_providers_cuda.so"
    rm -rf "$unpacked"
    nvidia=$(python3 -c 'import nvidia; print(next(iter(nvidia.__path__)))')
    ln -sfn "$nvidia" "$SITE/nvidia"
    libs=$(find "$nvidia" -maxdepth 3 -type d -name lib | paste -sd:)
    cat > "$SITE/env.sh" <<ENV
export PYTHONPATH=$SITE:$PWD\${PYTHONPATH:+:\$PYTHONPATH}
export LD_LIBRARY_PATH=$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
ENV
    . "$SITE/env.sh"
    python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.__file__, o.get_available_providers())"
    python3 docker/check-cuda-libs.py
    ;;
*)
    echo "usage: $0 append PART | install DIR" >&2
    exit 2
    ;;
esac
