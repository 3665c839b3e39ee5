#!/usr/bin/env bash
# herd's device check: everything about the GPU path that needs a GPU, in one
# run on a machine with one NVIDIA GPU, CUDA (nvcc), cmake, a C++ compiler and
# no network. Here, beforehand (a Debian 12 machine with network):
#
#   bash benchmarks/gpu/fetch_packages.sh        # fills .debs/ (about 9 MiB)
#
# then on the GPU machine, from the repository root, with .debs/ carried along:
#
#   bash benchmarks/gpu/device_check.sh
#
# Stages, each under its own time limit and all under one budget (450 s by
# default, HERD_CHECK_BUDGET_S), so that one stuck stage cannot eat the rest:
#   setup      Open MPI, fmt, Eigen, Catch2 and CLI11 from .debs/, unpacked
#              with `dpkg -x` into a prefix under /tmp (never into /), each
#              only where the machine lacks it (an Open MPI `mpirun` and
#              `mpicc` on the PATH are used as they are); checks that mpirun
#              and libmpi resolve (ldd) and that mpirun starts 2 ranks;
#              NCCL is CUDA's own where the toolkit has it, else the one a
#              Python package of the machine carries (nvidia-nccl-cu*, as
#              PyTorch's wheels bring it), found under the Python's
#              site-packages;
#   configure  herd with -DHERD_WITH_CUDA=ON -DHERD_BUILD_PYTHON=OFF;
#   build      with every core;
#   ctest gpu  `ctest -L gpu --output-on-failure` (each test's line in the table);
#   bench np1  herd-bench allreduce --device cuda, 1 rank (herd's NCCL path),
#              4 KiB .. 1 GiB, against raw ncclAllReduce and a d2d copy;
#   bench np2  the same at 2 ranks sharing the GPU with HERD_GPU_ALLREDUCE=MPI,
#              4 KiB .. 64 MiB, against MPI staged through pinned host memory;
#   fusion     herd-bench fusion: the fusion buffer's pack and unpack against
#              a d2d copy of as many bytes;
#   step       herd-bench step --device cuda, 1 rank: ResNet-50's gradients
#              through herd against one ncclAllReduce over all their bytes;
#   python     herd.torch on CUDA tensors, where python3 has a CUDA PyTorch
#              (a second build folder with the Python package only).
# At the end it prints one table (every stage, every GPU test, the bench rows
# side by side with their ratios, the GPU's name and driver) and writes it,
# with the logs, to $OUT when OUT is set (else to a new folder under /tmp):
#   summary.txt build.log ctest.log bench_np1.txt bench_np2.txt fusion.txt
#   step.txt [python.log]
# Exits 0 when every stage passed, 77 when nothing failed but the GPU stages
# found no CUDA device (a dry run), and 1 when a stage failed or ran out of time.
#
# Knobs (for dry runs on a machine without GPU, chiefly):
#   HERD_CHECK_BUDGET_S    the whole run's limit in seconds (450)
#   HERD_CHECK_JOBS        build jobs (every core)
#   HERD_CHECK_BUILD_DIR   build folder (/tmp/herd-device-build)
#   HERD_CHECK_PREFIX      where .debs/ is unpacked (/tmp/herd-debs)
#   HERD_CHECK_TARGETS     build these targets only (all)
#   HERD_CHECK_BUILD_LIMIT_S  the build stage's limit (300)
#   HERD_CHECK_KEEP_BUILD  1: build incrementally in an existing build folder
#   HERD_CHECK_FORCE_DEBS  1: use the carried packages even where the machine has its own
set -uo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
herd_handle_help "$@"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 2
started="$(date +%s)"
budget="${HERD_CHECK_BUDGET_S:-450}"
deadline=$((started + budget - 10)) # 10 s kept for the summary
jobs="${HERD_CHECK_JOBS:-$(nproc)}"
build="${HERD_CHECK_BUILD_DIR:-/tmp/herd-device-build}"
prefix="${HERD_CHECK_PREFIX:-/tmp/herd-debs}"
force_debs="${HERD_CHECK_FORCE_DEBS:-0}"
read -r -a targets <<<"${HERD_CHECK_TARGETS:-all}"
build_limit="${HERD_CHECK_BUILD_LIMIT_S:-300}"
keep_build="${HERD_CHECK_KEEP_BUILD:-0}"
debs="$root/.debs"
out="${OUT:-}"
if [[ -z "$out" ]]; then out="$(mktemp -d /tmp/herd-device-check.XXXXXX)"; fi
mkdir -p "$out"
summary="$out/summary.txt"
build_log="$out/build.log"
ctest_log="$out/ctest.log"
: >"$build_log"

# ---- The Python GPU test ------------------------------------------------------
# herd.torch on CUDA tensors (tests/python/test_torch_cuda.py) needs a Python
# with a CUDA build of PyTorch, pytest, numpy and pybind11 (the GPU image's
# python3 has them; Debian's packages do not). When that Python is there, a
# second build folder makes the Python package only (herd_python) and runs
# the Python GPU tests and the device branch of test_native_devices.py; the
# C++ build above stays free of Python, so a Python-side problem cannot stop
# the C++ checks. PYTHON_LIMIT_S bounds configure+build and the test each.
PYTHON_LIMIT_S=150
# ------------------------------------------------------------------------------

# The table's stage lines: name, result, seconds, detail.
stage_names=() stage_results=() stage_seconds=() stage_details=()
record() {
  stage_names+=("$1")
  stage_results+=("$2")
  stage_seconds+=("$3")
  stage_details+=("$4")
}
any_failed=0
any_skipped=0

# run_stage NAME LIMIT LOG COMMAND...: runs COMMAND, its output appended to
# LOG, under min(LIMIT, what is left of the budget) (timeout signals the
# whole process group, mpirun's ranks and the compilers included). Sets
# stage_rc and stage_elapsed; returns 0 if it ran to the end, whatever its
# status, and 1 if it was not started or timed out.
stage_rc=0
stage_elapsed=0
run_stage() {
  local name="$1" limit="$2" log="$3"
  shift 3
  local left=$((deadline - $(date +%s)))
  if ((left < limit)); then limit=$left; fi
  if ((limit < 10)); then
    record "$name" "not run" 0 "out of time (budget ${budget}s)"
    any_failed=1
    stage_rc=125
    return 1
  fi
  echo "==== $name (limit ${limit}s): $*" >>"$log"
  local begin
  begin="$(date +%s)"
  timeout -k 10 "$limit" "$@" </dev/null >>"$log" 2>&1
  stage_rc=$?
  stage_elapsed=$(($(date +%s) - begin))
  echo "==== $name: exit $stage_rc after ${stage_elapsed}s" >>"$log"
  if ((stage_rc == 124 || stage_rc == 137)); then
    record "$name" "TIMEOUT" "$stage_elapsed" "limit ${limit}s; see $(basename "$log")"
    any_failed=1
    return 1
  fi
  return 0
}

# pass_or_fail NAME DETAIL: the table line for a stage that ran to the end.
pass_or_fail() {
  if ((stage_rc == 0)); then
    record "$1" "pass" "$stage_elapsed" "$2"
  else
    record "$1" "FAIL" "$stage_elapsed" "exit $stage_rc; $2"
    any_failed=1
  fi
}

# The machine's system, and nvcc's version.
os_name() {
  # shellcheck disable=SC1091 # the machine's own file
  (. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}") || echo unknown
}
nvcc_version() {
  local nvcc
  nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  "$nvcc" --version 2>/dev/null | sed -nE 's/.*release ([0-9.]+).*/\1/p'
}

# ---- setup: herd's dependencies ----------------------------------------------
# The multiarch folder of this machine ("x86_64-linux-gnu").
triplet="$(gcc -dumpmachine 2>/dev/null || echo "$(uname -m)-linux-gnu")"
triplet="${triplet/-pc-/-}"
triplet="${triplet/-unknown-/-}"
mpi_note=""
nccl_note=""
# CMake 4 refuses the cmake_minimum_required of older package config files
# unless told the oldest policies it should accept.
cmake_dependency_args=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5)

# unpack PACKAGE...: dpkg -x each package's .deb from .debs/ into the prefix.
unpack() {
  if ! command -v dpkg >/dev/null; then
    echo "setup: no dpkg here to unpack .debs/ with"
    return 1
  fi
  local machine package deb arch
  machine="$(dpkg --print-architecture)"
  for package in "$@"; do
    deb="$(find "$debs" -maxdepth 1 -name "${package}_*.deb" -print -quit 2>/dev/null)"
    if [[ -z "$deb" ]]; then
      echo "setup: $package is not in .debs/ (run benchmarks/gpu/fetch_packages.sh here and" \
        "carry .debs to the GPU machine)"
      return 1
    fi
    arch="$(dpkg-deb -f "$deb" Architecture)"
    if [[ "$arch" != all && "$arch" != "$machine" ]]; then
      echo "setup: $(basename "$deb") is for $arch; this machine is $machine"
      return 1
    fi
    dpkg -x "$deb" "$prefix" || return 1
  done
}

# system_has CONFIG_FILE: whether a CMake package config file of that name is
# installed in the usual places (then find_package uses it and .debs/ is not).
# With a VERSION prefix (as "2."), only a file that declares such a
# PACKAGE_VERSION counts (herd's tests need Catch2 2, not 3).
system_has() {
  local file version="${2:-}"
  [[ "$force_debs" != 1 ]] || return 1
  [[ "$version" != "$1" ]] || version=""
  while read -r file; do
    [[ -z "$version" ]] && return 0
    grep -q "PACKAGE_VERSION \"$version" "$file" && return 0
  done < <(find /usr/lib /usr/lib64 /usr/share /usr/local/lib /usr/local/share -maxdepth 4 \
    -name "$1" 2>/dev/null)
  return 1
}

# The version of glibc, and the newest one the carried libraries ask for.
glibc_version() { getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}'; }
glibc_needed() {
  find "$@" -name '*.so*' -type f -print0 2>/dev/null | xargs -0 -r objdump -T 2>/dev/null |
    grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -uV | tail -n1
}

setup_open_mpi() {
  if [[ "$force_debs" != 1 ]] && command -v mpirun >/dev/null && command -v mpicc >/dev/null &&
    timeout 10 mpirun --version 2>&1 | grep -q 'Open MPI'; then
    mpi_note="system $(timeout 10 mpirun --version 2>&1 | head -n1)"
    if ! command -v ssh >/dev/null && ! command -v rsh >/dev/null; then
      export OMPI_MCA_plm_rsh_agent=false # local ranks only: no remote shell needed
    fi
    return 0
  fi
  echo "setup: unpacking Open MPI from .debs/ into $prefix"
  unpack openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libhwloc15 libpmix2 \
    libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 ibverbs-providers \
    librdmacm1 libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 \
    libudev1 libatomic1 libuuid1 || return 1
  local lib="$prefix/usr/lib/$triplet"
  # What the packages' maintainer scripts would have made: PSM's library
  # under its soname (an alternatives link).
  local psm
  psm="$(find "$prefix/usr/lib/libpsm1" -name 'libpsm_infinipath.so.1*' -type f -print -quit 2>/dev/null)"
  if [[ -n "$psm" ]]; then ln -sf "$psm" "$lib/libpsm_infinipath.so.1"; fi
  # The machine's own copy of a dependency wins (same soname), except for
  # Open MPI's and PMIx's own libraries, which must match each other.
  local file soname dropped=()
  for file in "$lib"/lib*.so.* "$prefix/lib/$triplet"/lib*.so.*; do
    [[ -e "$file" && "$force_debs" != 1 ]] || continue
    soname="$(basename "$file")"
    case "$soname" in libmpi* | libopen-* | libmca_* | liboshmem* | libompitrace* | libpmix*) continue ;; esac
    if ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$soname "; then
      rm -f "$file"
      dropped+=("$soname")
    fi
  done
  if ((${#dropped[@]} > 0)); then echo "setup: the machine's own ${dropped[*]} used instead"; fi

  # The links Debian's alternatives would have made, first on the PATH.
  local tool
  for tool in mpirun mpiexec mpicc; do ln -sf "$tool.openmpi" "$prefix/usr/bin/$tool"; done
  export PATH="$prefix/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$lib:$prefix/lib/$triplet:$lib/openmpi/lib:$lib/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Relocation: Open MPI finds its components and data under OPAL_PREFIX;
  # its configuration file and PMIx's plugins are at absolute paths unless
  # named; there is no ssh, and local ranks need none.
  export OPAL_PREFIX="$prefix/usr"
  export OMPI_MCA_mca_base_param_files="$prefix/etc/openmpi/openmpi-mca-params.conf"
  export PMIX_MCA_mca_base_component_path="$lib/pmix2/lib/pmix"
  export PMIX_PKGDATADIR="$lib/pmix2/share/pmix"
  export OMPI_MCA_plm_rsh_agent=false
  cmake_dependency_args+=(-DMPI_C_COMPILER="$prefix/usr/bin/mpicc.openmpi"
    -DMPIEXEC_EXECUTABLE="$prefix/usr/bin/mpirun.openmpi")
  mpi_note="carried $(dpkg-deb -f "$(find "$debs" -name 'libopenmpi3_*.deb' -print -quit)" Version | sed 's/^/Open MPI /') (Debian 12)"

  # The carried libraries must run on this glibc, and every library of
  # mpirun and libmpi must resolve.
  local have needed
  have="$(glibc_version)"
  needed="$(glibc_needed "$lib" "$prefix/lib")"
  if [[ -n "$have" && -n "$needed" ]] &&
    [[ "$(printf '%s\n%s\n' "$needed" "$have" | sort -V | head -n1)" != "$needed" ]]; then
    echo "setup: the carried libraries need glibc $needed; this machine has $have"
    return 1
  fi
  echo "setup: glibc $have, the carried libraries need ${needed:-?}"
  local resolved
  if ! resolved="$(ldd "$prefix/usr/bin/orterun" "$lib/libmpi.so.40" 2>&1)" ||
    grep -q 'not found' <<<"$resolved"; then
    echo "$resolved"
    echo "setup: mpirun or libmpi has unresolved libraries (above)"
    return 1
  fi
  echo "$resolved"
}

setup_build_packages() {
  # package config file, .deb packages, CMake variable, folder in the prefix
  local entries=(
    "fmt-config.cmake|libfmt-dev libfmt9|fmt_DIR|usr/lib/$triplet/cmake/fmt"
    "Eigen3Config.cmake|libeigen3-dev|Eigen3_DIR|usr/share/eigen3/cmake"
    "Catch2ConfigVersion.cmake:2.|catch2|Catch2_DIR|usr/lib/cmake/Catch2"
    "CLI11Config.cmake|libcli11-dev|CLI11_DIR|usr/share/cmake/CLI11"
  )
  local entry config packages variable folder carried=()
  for entry in "${entries[@]}"; do
    IFS='|' read -r config packages variable folder <<<"$entry"
    if system_has "${config%%:*}" "${config#*:}"; then continue; fi
    # shellcheck disable=SC2086 # the package list is meant to split
    unpack $packages || return 1
    cmake_dependency_args+=(-D"$variable=$prefix/$folder")
    carried+=("${variable%_DIR}")
  done
  if ((${#carried[@]} > 0)); then
    export LD_LIBRARY_PATH="$prefix/usr/lib/$triplet${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    mpi_note+="; carried ${carried[*]}"
  fi
}

# NCCL: CUDA's own (cmake/cuda.cmake finds it next to the toolkit), else
# the library and header of a Python package (nvidia-nccl-cu12/13, which
# PyTorch's wheels install), named to CMake by path: such a package has
# libnccl.so.2 but no libnccl.so for find_library.
setup_nccl() {
  local cuda_root
  cuda_root="$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")"
  if [[ -n "$(find "$cuda_root/" -maxdepth 4 -name 'libnccl.so*' -print -quit 2>/dev/null)" &&
    -n "$(find "$cuda_root/" -maxdepth 4 -name nccl.h -print -quit 2>/dev/null)" ]]; then
    nccl_note="NCCL of $cuda_root"
    return 0
  fi
  local py site header library
  py="$(command -v python3 || true)"
  site=""
  if [[ -n "$py" ]]; then
    site="$("$py" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null || true)"
  fi
  # NCCL's own header defines NCCL_MAJOR (a framework's nccl.h wrapper does
  # not); its library lies beside its include folder.
  while read -r header; do
    grep -q NCCL_MAJOR "$header" 2>/dev/null || continue
    library="$(find "$(dirname "$(dirname "$header")")" -maxdepth 3 -name 'libnccl.so*' -print \
      -quit 2>/dev/null)"
    [[ -n "$library" ]] || continue
    cmake_dependency_args+=(-DNCCL_INCLUDE_DIR="$(dirname "$header")" -DNCCL_LIBRARY="$library")
    export LD_LIBRARY_PATH="$(dirname "$library")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    nccl_note="NCCL $library"
    return 0
  done < <(for dir in $site /usr/local/lib /usr/lib /opt; do
    [[ -d "$dir" ]] && find "$dir" -maxdepth 7 -name nccl.h 2>/dev/null
  done)
  nccl_note="no NCCL found (GPU tensors take the MPI path)"
}

setup() {
  echo "setup: $(uname -m), $triplet, $(os_name), nvcc $(nvcc_version)"
  echo "setup: $(cmake --version 2>/dev/null | head -n1), $(c++ --version 2>/dev/null | head -n1)"
  echo "setup: python3 $(command -v python3 || echo none)"
  # Only a folder this script made is emptied (it holds the marker).
  if [[ -e "$prefix" && ! -f "$prefix/.herd-device-check" ]]; then
    echo "setup: $prefix exists and is not this script's; set HERD_CHECK_PREFIX elsewhere"
    return 1
  fi
  rm -rf "$prefix"
  mkdir -p "$prefix"
  touch "$prefix/.herd-device-check"
  setup_open_mpi || return 1
  setup_build_packages || return 1
  setup_nccl
  echo "setup: $nccl_note"
  # mpirun itself: two ranks of a program that is not MPI.
  timeout 30 mpirun "${mpirun_flags[@]}" -np 2 true || {
    echo "setup: mpirun cannot start 2 local ranks"
    return 1
  }
  echo "setup: $mpi_note"
  echo "setup: CMake arguments: ${cmake_dependency_args[*]}"
}

# Run as root in a container: Open MPI refuses root without these, and its
# shared-memory transport's single-copy (CMA) needs ptrace rights a container
# often lacks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl_sm_single_copy_mechanism=none
# One machine: NCCL's bootstrap on the loopback interface, and its warnings
# in the logs.
export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
mpirun_flags=(--oversubscribe)
if [[ "$(id -u)" -eq 0 ]]; then mpirun_flags+=(--allow-run-as-root); fi

if command -v nvidia-smi >/dev/null; then
  gpu_line="$(timeout 20 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 |
    head -n4 | paste -sd';' -)"
else
  gpu_line="nvidia-smi not found"
fi

setup_began="$(date +%s)"
echo "==== setup" >>"$build_log"
setup >>"$build_log" 2>&1
setup_rc=$?
stage_rc=$setup_rc
stage_elapsed=$(($(date +%s) - setup_began))
pass_or_fail "setup" "${mpi_note:-see build.log}; ${nccl_note:-}"

# ---- configure and build -------------------------------------------------------
built=0
if ((setup_rc == 0)); then
  generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  # A fresh build: a folder that is not a CMake build folder is left alone.
  if [[ -e "$build" && ! -f "$build/CMakeCache.txt" ]]; then
    echo "configure: $build exists and is not a build folder" >>"$build_log"
    record "configure" "FAIL" 0 "$build exists and is not a build folder (HERD_CHECK_BUILD_DIR)"
    any_failed=1
    stage_rc=1
  elif [[ "$keep_build" != 1 ]]; then
    rm -rf "$build"
  fi
  if ((stage_rc == 0)) && run_stage "configure" 120 "$build_log" cmake -S "$root" -B "$build" "${generator[@]}" \
    -DHERD_WITH_CUDA=ON -DHERD_BUILD_PYTHON=OFF -DHERD_BUILD_EXAMPLES=OFF \
    "${cmake_dependency_args[@]}"; then
    pass_or_fail "configure" "HERD_WITH_CUDA=ON, $(grep -o 'NCCL found' "$build_log" | head -n1 || true)"
  fi
  if ((stage_rc == 0)); then
    if run_stage "build" "$build_limit" "$build_log" cmake --build "$build" -j "$jobs" --target "${targets[@]}"; then
      pass_or_fail "build" "$jobs jobs, targets: ${targets[*]}"
    fi
    if ((stage_rc == 0)); then built=1; fi
  else
    record "build" "not run" 0 "no configuration"
  fi
else
  record "configure, build" "not run" 0 "setup failed"
fi

# ---- the GPU tests ----------------------------------------------------------------
test_lines=()
if ((built)); then
  if run_stage "ctest -L gpu" 150 "$ctest_log" env -C "$build" ctest -L gpu \
    --output-on-failure --timeout 120; then
    counts="$(grep -E 'tests passed|tests failed' "$ctest_log" | tail -n1)"
    pass_or_fail "ctest -L gpu" "${counts:-see ctest.log}"
  fi
  # "1/4 Test #7: gpu_kernels ..........   Passed    0.52 sec" and the like.
  while read -r test_name test_result; do
    case "$test_result" in
      Passed) test_lines+=("$test_name|pass") ;;
      Skipped) test_lines+=("$test_name|skip") any_skipped=1 ;;
      *) test_lines+=("$test_name|FAIL ($test_result)") any_failed=1 ;;
    esac
  done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: +([^ ]+) +\.* *(\*\*\*)?([A-Za-z]+( Run)?).*/\1 \3/p' \
    "$ctest_log")
  if grep -q 'No tests were found' "$ctest_log"; then
    record "  (no gpu tests)" "FAIL" 0 "ctest -L gpu found no tests"
    any_failed=1
  fi
else
  record "ctest -L gpu" "not run" 0 "no build"
  any_failed=1
fi

# ---- herd-bench on GPU buffers -----------------------------------------------------
bench="$build/benchmarks/herd-bench"
# bench NAME FILE LIMIT RANKS ENV... -- ARGS...: one run of herd-bench
# allreduce --device cuda, its table and notes in FILE.
bench() {
  local name="$1" file="$2" limit="$3" ranks="$4"
  shift 4
  local env=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do env+=("$1") && shift; done
  shift
  if ((!built)); then
    record "$name" "not run" 0 "no build"
    any_failed=1
    return
  fi
  : >"$file"
  run_stage "$name" "$limit" "$file" env "${env[@]}" mpirun "${mpirun_flags[@]}" -np "$ranks" \
    "$bench" allreduce --device cuda -q "$@" || return
  local wrong
  wrong="$(awk '$1 ~ /^[0-9]+$/ && NF == 9 && $9 ~ /^[0-9]+$/ { w += $9 } END { print w + 0 }' "$file")"
  case "$stage_rc" in
    0) record "$name" "pass" "$stage_elapsed" "$wrong wrong; ${env[*]:-}" ;;
    77)
      record "$name" "skip" "$stage_elapsed" "no CUDA device visible"
      any_skipped=1
      ;;
    1)
      record "$name" "FAIL" "$stage_elapsed" "$wrong wrong elements"
      any_failed=1
      ;;
    *)
      record "$name" "FAIL" "$stage_elapsed" "exit $stage_rc; see $(basename "$file")"
      any_failed=1
      ;;
  esac
}
bench "bench np1 (NCCL path)" "$out/bench_np1.txt" 180 1 HERD_GPU_ALLREDUCE=NCCL -- \
  -b 4K -e 1G -f 4 -n 20 -w 5
bench "bench np2 (MPI path)" "$out/bench_np2.txt" 90 2 HERD_GPU_ALLREDUCE=MPI -- \
  -b 4K -e 64M -f 4 -n 10 -w 3

# ---- the fusion buffer's copies and a model's step ----------------------------------
# one_rank_bench NAME FILE LIMIT ARGS...: one herd-bench run at 1 rank on the
# NCCL path, its output in FILE; herd-bench checks every element itself.
one_rank_bench() {
  local name="$1" file="$2" limit="$3"
  shift 3
  if ((!built)); then
    record "$name" "not run" 0 "no build"
    any_failed=1
    return
  fi
  : >"$file"
  run_stage "$name" "$limit" "$file" env HERD_GPU_ALLREDUCE=NCCL mpirun "${mpirun_flags[@]}" \
    -np 1 "$bench" "$@" || return
  case "$stage_rc" in
    0) record "$name" "pass" "$stage_elapsed" "every result checked" ;;
    77)
      record "$name" "skip" "$stage_elapsed" "no CUDA device visible"
      any_skipped=1
      ;;
    *)
      record "$name" "FAIL" "$stage_elapsed" "exit $stage_rc; see $(basename "$file")"
      any_failed=1
      ;;
  esac
}
one_rank_bench "fusion (pack/unpack)" "$out/fusion.txt" 90 fusion -n 50 -w 5
one_rank_bench "step resnet50 np1" "$out/step.txt" 90 step --device cuda --model resnet50 \
  -n 50 -w 5 -q

# ---- the Python GPU test ------------------------------------------------------------
python_gpu_test() {
  local py log="$out/python.log"
  py="$(command -v python3 || true)"
  if [[ -z "$py" ]] || ! "$py" -c 'import torch, pybind11, pytest, numpy' >/dev/null 2>&1; then
    record "python gpu test" "not run" 0 "no python3 with torch, pybind11, pytest and numpy"
    return
  fi
  if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    record "python gpu test" "skip" 0 "torch.cuda.is_available() is false"
    any_skipped=1
    return
  fi
  local py_build="$build-python"
  rm -rf "$py_build"
  # shellcheck disable=SC2016 # expanded by the inner bash, from its arguments
  if run_stage "python build" "$PYTHON_LIMIT_S" "$log" bash -c '
      cmake -S "$1" -B "$2" -DHERD_WITH_CUDA=ON -DHERD_BUILD_PYTHON=ON \
        -DPython3_EXECUTABLE="$3" -Dpybind11_DIR="$("$3" -m pybind11 --cmakedir)" \
        -DHERD_BUILD_EXAMPLES=OFF -DHERD_BUILD_BENCHMARKS=OFF "${@:5}" &&
      cmake --build "$2" -j "$4" --target herd_python' _ "$root" "$py_build" "$py" "$jobs" \
    "${cmake_dependency_args[@]}"; then
    pass_or_fail "python build" "herd._native for $("$py" -c 'import sys; print(sys.version.split()[0])'), torch $("$py" -c 'import torch; print(torch.__version__)')"
  fi
  ((stage_rc == 0)) || return
  if run_stage "python gpu test" "$PYTHON_LIMIT_S" "$log" ctest --test-dir "$py_build" \
    -R 'torch_cuda|native_devices' --output-on-failure --timeout 120; then
    pass_or_fail "python gpu test" "$(grep -E 'tests passed|tests failed' "$log" | tail -n1)"
  fi
}
if ((built)); then
  python_gpu_test
else
  record "python gpu test" "not run" 0 "no build"
fi

# ---- the table -----------------------------------------------------------------------
# bench_table FILE: the rows of one herd-bench table side by side per size,
# in GB/s (busbw, or algbw at 1 rank, where busbw is 0), with the ratios.
bench_table() {
  awk '
    function size(b) {
      if (b >= 1048576) return sprintf("%g MiB", b / 1048576)
      if (b >= 1024) return sprintf("%g KiB", b / 1024)
      return b " B"
    }
    function bw(key) { return (key in gbps) ? sprintf("%.2f", gbps[key]) : "-" }
    function ratio(a, b) {
      return ((a in gbps) && (b in gbps) && gbps[b] > 0) ? sprintf("%.2f", gbps[a] / gbps[b]) : "-"
    }
    /^# herd-bench allreduce:/ { ranks = $4; title = $0; sub(/^# herd-bench /, "", title) }
    $1 ~ /^[0-9]+$/ && NF == 9 {
      if (!($1 in seen)) { seen[$1] = 1; order[++sizes] = $1 }
      gbps[$1 "," $5] = (ranks > 1 && $5 != "d2d") ? $8 : $7
      if ($9 ~ /^[0-9]+$/) wrong[$1] += $9
    }
    END {
      if (sizes == 0) { print "    (no rows)"; exit }
      print "    " title
      unit = (ranks > 1) ? "busbw" : "algbw (busbw is 0 at 1 rank)"
      printf "    GB/s: %s; d2d: algbw of one device-to-device copy\n", unit
      printf "    %-10s %9s %9s %11s %9s %10s %11s %9s %7s\n", "size", "herd", "nccl",
        "mpi-staged", "d2d", "herd/nccl", "herd/staged", "herd/d2d", "#wrong"
      for (i = 1; i <= sizes; ++i) {
        s = order[i]
        printf "    %-10s %9s %9s %11s %9s %10s %11s %9s %7d\n", size(s), bw(s ",herd"),
          bw(s ",nccl"), bw(s ",mpi-staged"), bw(s ",d2d"), ratio(s ",herd", s ",nccl"),
          ratio(s ",herd", s ",mpi-staged"), ratio(s ",herd", s ",d2d"), wrong[s]
      }
    }' "$1"
}

finish() {
  local status="pass" code=0
  if ((any_failed)); then
    status="FAILED"
    code=1
  elif ((any_skipped)); then
    status="DRY RUN (no CUDA device: GPU stages skipped)"
    code=77
  fi
  {
    echo "herd device check, $(date -u +%Y-%m-%dT%H:%MZ): $status, $(($(date +%s) - started)) s of $budget"
    echo "GPU (name, driver): $gpu_line"
    echo "host: $(uname -m), $(os_name), $(nproc) cores, nvcc $(nvcc_version)"
    echo
    printf '%-30s %-8s %6s  %s\n' "check" "result" "time" "detail"
    local i line
    for i in "${!stage_names[@]}"; do
      printf '%-30s %-8s %5ss  %s\n' "${stage_names[$i]}" "${stage_results[$i]}" \
        "${stage_seconds[$i]}" "${stage_details[$i]}"
      if [[ "${stage_names[$i]}" == "ctest -L gpu" ]]; then
        for line in "${test_lines[@]}"; do
          printf '  %-28s %s\n' "${line%%|*}" "${line#*|}"
        done
      fi
    done
    for file in "$out/bench_np1.txt" "$out/bench_np2.txt"; do
      [[ -s "$file" ]] || continue
      echo
      echo "$(basename "$file"):"
      bench_table "$file"
    done
    # The fusion and step tables as herd-bench printed them.
    for file in "$out/fusion.txt" "$out/step.txt"; do
      [[ -s "$file" ]] || continue
      echo
      echo "$(basename "$file"):"
      grep -vE '^(\[[0-9]+/[0-9]+\]|====)' "$file" | sed 's/^/    /'
    done
    echo
    echo "logs: $out"
  } >"$summary"
  cat "$summary"
  exit "$code"
}
finish
