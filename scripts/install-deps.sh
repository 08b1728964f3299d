#!/usr/bin/env bash
# Installs everything ckptconv needs to build and to run its whole test suite on a fresh
# Debian 12 machine (run as root). Safe to run again: apt and pip skip what is present.
#
# - Debian packages: the C toolchain and libraries, clang with its OpenMP runtime (fuzzers),
#   valgrind, GNU time,
#   and Debian's torch 1.13 (python3-torch), which the torch interop tests and the
#   fixture generators use through /usr/bin/python3.
# - .venv in the repository root, created with --system-site-packages so that Debian's
#   torch and numpy 1.24 are visible inside it, plus PaddlePaddle (CPU), safetensors, h5py
#   and hdf5plugin (HDF5 compression filters, zstd among them) from PyPI. numpy is held
#   below 2 because Debian's torch is built against numpy 1.24; the check at the end fails
#   if the venv picked up any other numpy.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv"
SYS_PYTHON=/usr/bin/python3

# Versions verified together on Debian 12 (Python 3.11, numpy 1.24.2, torch 1.13.1).
PADDLE_VERSION=3.3.1
SAFETENSORS_VERSION=0.8.0
H5PY_VERSION=3.16.0
HDF5PLUGIN_VERSION=7.1.0

APT_PACKAGES=(
    build-essential cmake pkg-config
    zlib1g-dev libzstd-dev zstd libcjson-dev libdeflate-dev libhdf5-dev
    python3 python3-venv python3-numpy python3-torch
    clang libclang-rt-14-dev libomp-dev valgrind time
)

die() {
    echo "install-deps: FAILED: $*" >&2
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    die "run as root (apt-get install needs it)"
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-deps: apt-get update"
apt-get update -q
echo "install-deps: apt-get install ${APT_PACKAGES[*]}"
apt-get install -y -q --no-install-recommends "${APT_PACKAGES[@]}"

for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
        || die "Debian package $pkg is not installed"
done

[ -x "$SYS_PYTHON" ] || die "$SYS_PYTHON is missing"
"$SYS_PYTHON" -c 'import torch, numpy' || die "Debian torch/numpy do not import in $SYS_PYTHON"

if [ ! -x "$VENV/bin/python" ]; then
    echo "install-deps: creating $VENV"
    "$SYS_PYTHON" -m venv --system-site-packages "$VENV"
fi
# A venv made by another interpreter would not see Debian's torch.
"$VENV/bin/python" -c 'import sys; sys.exit(0 if sys.base_prefix == "/usr" else 1)' \
    || die "$VENV was not created from $SYS_PYTHON; remove it and run again"

echo "install-deps: pip install paddlepaddle==$PADDLE_VERSION safetensors==$SAFETENSORS_VERSION" \
    "h5py==$H5PY_VERSION hdf5plugin==$HDF5PLUGIN_VERSION"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "paddlepaddle==$PADDLE_VERSION" "safetensors==$SAFETENSORS_VERSION" \
    "h5py==$H5PY_VERSION" "hdf5plugin==$HDF5PLUGIN_VERSION" "numpy<2"

# Every framework imports in the venv, the numpy there is Debian's, and torch <-> numpy works.
"$VENV/bin/python" - "$SYS_PYTHON" <<'EOF' || die "the venv check failed (see above)"
import os
import subprocess
import sys
import tempfile
import warnings

warnings.simplefilter("ignore")
import h5py
import hdf5plugin
import numpy
import paddle
import safetensors
import safetensors.numpy
import safetensors.torch
import torch

sys_numpy = subprocess.run(
    [sys.argv[1], "-c", "import numpy; print(numpy.__version__, numpy.__file__)"],
    check=True, capture_output=True, text=True).stdout.split()
if [numpy.__version__, numpy.__file__] != sys_numpy:
    sys.exit(f"venv numpy {numpy.__version__} at {numpy.__file__} shadows Debian's "
             f"{sys_numpy[0]} at {sys_numpy[1]}")
if int(numpy.__version__.split(".")[0]) >= 2:
    sys.exit(f"numpy {numpy.__version__} is too new for Debian's torch")

t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
a = t.numpy()
if not torch.equal(torch.from_numpy(a * 2), t * 2):
    sys.exit("torch <-> numpy round trip gave different values")
p = paddle.to_tensor(a).astype("bfloat16")
if p.numpy().dtype != numpy.uint16:
    sys.exit(f"paddle bfloat16 -> numpy gave {p.numpy().dtype}, expected uint16")
st = safetensors.torch.load(safetensors.torch.save({"x": t.to(torch.bfloat16)}))
if not torch.equal(st["x"].float(), t):
    sys.exit("safetensors bf16 round trip gave different values")

# hdf5plugin's zstd filter (registered id 32015) writes and reads a chunked dataset.
ZSTD_FILTER = 32015
if not h5py.h5z.filter_avail(ZSTD_FILTER):
    sys.exit(f"HDF5 filter {ZSTD_FILTER} (zstd) is not available after import hdf5plugin")
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "zstd.h5")
    data = numpy.arange(4096, dtype=numpy.float32).reshape(64, 64) % 7
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=(16, 64), **hdf5plugin.Zstd(clevel=3))
    with h5py.File(path, "r") as f:
        dcpl = f["x"].id.get_create_plist()
        filters = [dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters())]
        if filters != [ZSTD_FILTER] or not numpy.array_equal(f["x"][()], data):
            sys.exit(f"hdf5plugin zstd round trip failed (filters {filters})")

print("install-deps: venv python", sys.version.split()[0])
for name, mod in (("torch", torch), ("numpy", numpy), ("paddlepaddle", paddle),
                  ("safetensors", safetensors), ("h5py", h5py)):
    print(f"install-deps:   {name} {mod.__version__}")
print(f"install-deps:   hdf5plugin {hdf5plugin.version} (HDF5 {h5py.version.hdf5_version} in h5py)")
EOF

echo "install-deps: Debian packages:"
dpkg-query -W -f='install-deps:   ${Package} ${Version}\n' "${APT_PACKAGES[@]}"
echo "install-deps: OK"
