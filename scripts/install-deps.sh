#!/usr/bin/env bash
# Installs everything alphast needs to build and test on Debian 12 (run as root).
# --bench adds Debian's PyTorch for `make bench-torch` and `make parity` (large;
# the tests never need it).
set -euo pipefail
packages=(
  build-essential autoconf automake libtool pkg-config
  libltdl-dev libyaml-dev libopenblas-dev liblua5.4-dev libhdf5-dev libcjson-dev zlib1g-dev nettle-dev libcriterion-dev liblzf-dev
  clang libclang-rt-14-dev # make fuzz (tests/fuzz): clang and its libFuzzer/sanitizer runtime
  python3-anndata # make check: sample's .h5ad read back by the real anndata (those tests skip without it)
  python3-yaml # the Python door (python/alphast) reads a run's config.yaml; its tests skip without it
  protobuf-compiler python3-protobuf # make check: TensorBoard's events decoded as Event messages (skips without)
  help2man # the man pages, made from --help (a release tarball ships them made)
  openmpi-bin libopenmpi-dev # one run over MPI (configure --with-mpi; build.sh turns it on, make check runs mpirun)
  libdnnl-dev # oneDNN: training.precision: bf16-mixed (optional for configure; CI builds and tests it)
  slurm-wlm munge iproute2 # make check: tests/test_slurm.sh starts a one-node Slurm (scripts/slurm-local.sh)
)
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(python3-torch) ;;
    *) echo "usage: $0 [--bench]" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "alphast: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
