#!/usr/bin/env bash
# Builds .tilebundle/cu13.tar.xz, the tileiras toolchain that
# `GPU_CHECK_ONLY=cuda_tile scripts/gpu_check.sh` unpacks on a GPU machine
# without network access (docs/design/0014-cuda-tile-target.md):
# bin/tileiras, bin/ptxas, lib/libnvvm.so.4 and nvvm/libdevice of one CUDA
# release, in the pip packages' nvidia/cu13 layout.
#
#   scripts/make_tile_bundle.sh [VERSION]      (default 13.5.37)
#
# Needs PyPI (pip download) and about 4 minutes of one core for xz. The
# archive must leave room for the working tree in a device call's 64 MiB:
# x86 filtering and one thread with a 256 MiB dictionary (tileiras, ptxas
# and libnvvm share code) make it 53.5 MiB, against 59.2 with `xz -9e -T2`.
# .tilebundle/ is ignored by git; name it in the device call's `carry`.
set -euo pipefail
version="${1:-13.5.37}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m pip download -q --no-deps -d "$work/wheels" \
  "nvidia-cuda-tileiras==$version" "nvidia-nvvm==$version" "nvidia-cuda-nvcc==$version"
# Wheels are zip files, which keep no permission bits here: the binaries
# are made executable after extraction (tileiras refuses otherwise).
"$python" - "$work/wheels" "$work/x" <<'EOF'
import pathlib, sys, zipfile
wheels, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for w in sorted(wheels.glob("*.whl")):
    zipfile.ZipFile(w).extractall(out)
EOF
home="$work/x/nvidia/cu13"
for f in bin/tileiras bin/ptxas lib/libnvvm.so.4 nvvm/libdevice; do
  [ -e "$home/$f" ] || { echo "make_tile_bundle: the $version wheels have no nvidia/cu13/$f" >&2; exit 1; }
done
chmod +x "$home/bin/tileiras" "$home/bin/ptxas"
mkdir -p "$root/.tilebundle"
tar -C "$work/x" -cf - nvidia/cu13/bin/tileiras nvidia/cu13/bin/ptxas nvidia/cu13/lib/libnvvm.so.4 \
  nvidia/cu13/nvvm/libdevice | xz --x86 --lzma2=preset=9e,dict=256MiB -T1 > "$root/.tilebundle/cu13.tar.xz.tmp"
mv "$root/.tilebundle/cu13.tar.xz.tmp" "$root/.tilebundle/cu13.tar.xz"
ls -l "$root/.tilebundle/cu13.tar.xz"
