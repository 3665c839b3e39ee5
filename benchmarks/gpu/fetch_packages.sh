#!/usr/bin/env bash
# Downloads, on this (Debian 12) machine, the .deb files that
# benchmarks/gpu/device_check.sh needs on a GPU machine that has CUDA, cmake
# and a compiler but neither Open MPI nor herd's C++ libraries, and no network:
#
#   bash benchmarks/gpu/fetch_packages.sh
#
# The files land in .debs/ at the repository root (ignored by git), to be
# copied to the GPU machine with the source tree. Nothing is installed or
# unpacked here: `apt-get download` only fetches the archives. device_check.sh
# unpacks them with `dpkg -x` into a prefix under /tmp and uses each one only
# where the GPU machine lacks it.
#
# The list is explicit, so that what travels is known and small: Open MPI and
# the runtime libraries it links (hwloc, PMIx, libevent, libfabric, UCX,
# verbs, PSM, netlink, NUMA, munge) that an Ubuntu CUDA image lacks, and the
# header-only or small libraries herd builds against (fmt, Eigen, Catch2,
# CLI11). After the download the script reads every archive's Depends and
# names any library dependency that is neither fetched nor part of a base
# image, so that a change of the list shows up here rather than on the GPU
# machine. Exits non-zero if a download fails or .debs/ exceeds 40 MiB.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
herd_handle_help "$@"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="$root/.debs"
limit_mib=40

# Open MPI: headers and mpicc's data (-dev), mpirun/orted (-bin), its data
# files (-common), the libraries and their shared-library dependencies.
mpi_packages=(
  libopenmpi-dev openmpi-bin openmpi-common libopenmpi3
  libhwloc15 libpmix2 libevent-core-2.1-7 libevent-pthreads-2.1-7
  libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1
  libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2
  # Usually in the base image; device_check.sh drops them there (same soname).
  libudev1 libatomic1 libuuid1
)
# What herd's CMakeLists find_package()s besides MPI and CUDA.
build_packages=(libfmt-dev libfmt9 libeigen3-dev catch2 libcli11-dev)

# Dependencies left out on purpose: the base system and the C/C++ runtime
# (every image with a compiler has them), the -dev packages and documentation
# that libopenmpi-dev names but a C build does not read, Fortran, hwloc's
# optional plugins (dlopen'ed only if present), and ssh (mpirun starts local
# ranks itself; device_check.sh points plm_rsh_agent elsewhere).
base_packages=(
  libc6 libgcc-s1 libstdc++6 gcc-12-base zlib1g debconf adduser pkg-config pkgconf
  gfortran-12 gfortran-mod-15 libibverbs-dev libhwloc-dev libevent-dev libpmix-dev
  libjs-jquery libjs-jquery-ui zlib1g-dev openssh-client ssh-client libhwloc-plugins
)

if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "fetch_packages: needs apt-get and dpkg-deb (a Debian 12 machine)" >&2
  exit 2
fi
# shellcheck disable=SC1091
codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-unknown}")"
if [[ "$codename" != bookworm ]]; then
  echo "fetch_packages: warning: this is $codename, not Debian 12 (bookworm);" \
    "device_check.sh was tested with bookworm's packages" >&2
fi

mkdir -p "$dest"
rm -f "$dest"/*.deb "$dest/MANIFEST.txt"
cd "$dest"
# -o APT::Sandbox::User=root: apt-get's _apt user may not write here.
apt-get -q -o APT::Sandbox::User=root download "${mpi_packages[@]}" "${build_packages[@]}"

# The manifest names what was fetched, for the device's log.
{
  echo "# fetched by benchmarks/gpu/fetch_packages.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "($codename, $(dpkg --print-architecture))"
  for deb in *.deb; do
    dpkg-deb -f "$deb" Package Version Architecture | paste -sd' ' -
  done
} >MANIFEST.txt

# Every dependency of a fetched package must be fetched or deliberately left out.
declare -A known=()
for name in "${mpi_packages[@]}" "${build_packages[@]}" "${base_packages[@]}"; do
  known[$name]=1
done
missing=()
for deb in *.deb; do
  depends="$(dpkg-deb -f "$deb" Depends)"
  [[ -z "$depends" ]] && continue
  # "a (>= 1), b | c, d:any" -> the first alternative of each, without versions.
  while read -r dep; do
    [[ -z "$dep" || -n "${known[$dep]:-}" ]] && continue
    missing+=("$dep (needed by ${deb%%_*})")
  done < <(tr ',' '\n' <<<"$depends" | sed -E 's/\|.*//; s/\(.*\)//; s/:any//; s/[[:space:]]//g')
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "fetch_packages: warning: dependencies neither fetched nor known to be in the image:" >&2
  printf '  %s\n' "${missing[@]}" | sort -u >&2
fi

bytes="$(du -cb ./*.deb | tail -n1 | cut -f1)"
count="$(find . -maxdepth 1 -name '*.deb' | wc -l)"
mib="$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')"
echo "fetch_packages: $count packages, $mib MiB in $dest"
if ((bytes > limit_mib * 1048576)); then
  echo "fetch_packages: more than $limit_mib MiB: the packages are meant to travel with the tree; check the list" >&2
  exit 1
fi
