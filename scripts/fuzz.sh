#!/usr/bin/env bash
# Builds and runs alphast's libFuzzer targets (tests/fuzz/README.md).
#
#   scripts/fuzz.sh [TARGET...]       every target, or those named (config, override,
#                                     safetensors, csv, h5ad, sweep, h5ad_write,
#                                     sweep_values, schedule, ledger)
#
# The targets need clang and its sanitizer/fuzzer runtime (libclang-rt-14-dev), so
# they build in a tree of their own, configured with CC=clang and instrumented
# for libFuzzer + ASan + UBSan; the normal (gcc) build is untouched. Each target
# runs from a work copy of its committed seed corpus (new inputs it finds stay
# there, out of the source tree) for FUZZ_SECONDS seconds. The run fails on any
# finding: a crash, a sanitizer report, a leak, a failed check of the target,
# an input slower than FUZZ_TIMEOUT seconds or one that takes more than
# FUZZ_RSS_MB of memory. The reproducer is kept in FUZZ_FINDINGS and the
# command to replay it is printed. One exception, h5ad: hangs, memory blow-ups
# and crashes inside libhdf5 itself are counted and kept, not failures (see
# target_args).
#
# Environment:
#   FUZZ_SECONDS   seconds per target (default 60)
#   FUZZ_BUILD     the clang build tree (default _build-fuzz in the source tree)
#   FUZZ_WORK      work corpora and logs (default FUZZ_BUILD/work)
#   FUZZ_FINDINGS  where reproducers go (default FUZZ_BUILD/findings)
#   FUZZ_TIMEOUT   per-input time limit in seconds (default 10)
#   FUZZ_RSS_MB    memory limit in MB (default 2048)
#   FUZZ_JOBS      targets run at once (default 1)
#   FUZZ_ARGS      extra libFuzzer arguments
#   FUZZ_NO_BUILD  1: run the targets already built in FUZZ_BUILD
#   FUZZ_CC        the compiler (default clang)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
all_targets=(config override safetensors csv h5ad sweep h5ad_write sweep_values schedule ledger)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [ -f "$top/tests/fuzz/fuzz_$t.c" ] || { echo "alphast fuzz: no target '$t' (have: ${all_targets[*]})" >&2; exit 2; }
done
seconds=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD:-$top/_build-fuzz}
mkdir -p "$build"
build=$(cd "$build" && pwd)
work=${FUZZ_WORK:-$build/work}
findings=${FUZZ_FINDINGS:-$build/findings}
timeout=${FUZZ_TIMEOUT:-10}
rss=${FUZZ_RSS_MB:-2048}
jobs=${FUZZ_JOBS:-1}
cc=${FUZZ_CC:-clang}
# Instrumented for coverage, ASan and UBSan (every UBSan report is fatal, so
# libFuzzer sees it as a crash). -O1: fast enough, still readable stacks.
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cflags="-O1 -g $san -fsanitize=fuzzer-no-link"

build_targets() {
  command -v "$cc" >/dev/null || { echo "alphast fuzz: $cc not found; apt-get install clang libclang-rt-14-dev" >&2; exit 1; }
  local probe
  probe=$(mktemp -d)
  printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$probe/p.c"
  if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
    cat "$probe/err" >&2
    echo "alphast fuzz: $cc cannot link libFuzzer targets; apt-get install libclang-rt-14-dev" >&2
    rm -rf "$probe"
    exit 1
  fi
  rm -rf "$probe"
  cd "$top"
  if ! [ -x configure ] || [ configure.ac -nt configure ]; then
    autoreconf -fi >"$build/autoreconf.log" 2>&1 || { cat "$build/autoreconf.log"; exit 1; }
  fi
  cd "$build"
  # Configure once per compiler and flags; after that make itself reruns
  # automake and config.status when the build files change.
  local stamp="$cc $cflags"
  if ! [ -f Makefile ] || [ "$(cat fuzz-configured 2>/dev/null)" != "$stamp" ]; then
    echo "alphast fuzz: configuring a $cc build in $build"
    "$top/configure" -q CC="$cc" CFLAGS="$cflags" --disable-native >configure.log 2>&1 ||
      { grep -v "cannot remove 'core'" configure.log; exit 1; }
    echo "$stamp" >fuzz-configured
  fi
  echo "alphast fuzz: building libalphast.la"
  make -j"$(nproc)" libalphast.la >make.log 2>&1 || { tail -40 make.log; exit 1; }
  local pc="yaml-0.1 lua5.4 hdf5 libcjson zlib"
  local inc
  # shellcheck disable=SC2086 # a list of modules
  inc=$(pkg-config --cflags $pc)
  mkdir -p fuzz
  for t in "${targets[@]}"; do
    local src="$top/tests/fuzz/fuzz_$t.c" obj="fuzz/fuzz_$t.o" exe="fuzz/fuzz_$t"
    if [ -x "$exe" ] && [ "$exe" -nt libalphast.la ] && [ -z "$(find "$src" "$top"/tests/fuzz/*.h -newer "$exe")" ]; then
      continue
    fi
    echo "alphast fuzz: building fuzz_$t"
    # shellcheck disable=SC2086
    "$cc" -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Wno-unused-parameter $cflags \
      -I"$top/include" -I"$top/core" -I"$top/tests/fuzz" $inc -c "$src" -o "$obj"
    # libtool adds libalphast.la's own libraries (libyaml, libhdf5, Lua, ...).
    # shellcheck disable=SC2086 # flag lists
    ./libtool --quiet --tag=CC --mode=link "$cc" $cflags -fsanitize=fuzzer -o "$exe" "$obj" libalphast.la >>make.log 2>&1 ||
      { tail -40 make.log; exit 1; }
  done
}

# Per-target libFuzzer options.
target_args() { # name
  case $1 in
    # libhdf5 1.10.8 itself has bugs that damaged files reach within
    # seconds of fuzzing: it loops forever (H5HG_read), believes sizes (a
    # string that claims 4 GB gets 4 GB) and reads outside its own buffers.
    # ast_data_read_h5ad parses in a helper process with a time limit for
    # that reason. Here libFuzzer's fork mode goes on past a timeout (5 s)
    # or an out-of-memory, and run_target sorts each crash (classify):
    # one inside libhdf5's own memory or code is counted, its input kept,
    # and fuzzing resumes; any other crash fails the run. libhdf5 also
    # asks malloc for terabytes and copes with the NULL it gets in
    # production: no malloc limit here (allocator_may_return_null=1, see
    # asan_options); alphast's own allocations still fail loudly
    # (ast_xmalloc exits, a crash).
    h5ad) echo "-fork=1 -ignore_timeouts=1 -ignore_ooms=1 -timeout=5 -malloc_limit_mb=1048576" ;;
  esac
}

asan_options() { # name
  local null=0
  [ "$1" = h5ad ] && null=1
  echo "halt_on_error=1:detect_leaks=1:allocator_may_return_null=$null"
}

# Reads a crash report on stdin; prints "libhdf5: why" when the fault is
# libhdf5's own (an access to memory it allocated, a read fault in its
# code, a huge request of its own), "alphast: why" otherwise.
classify() {
  awk '
    /alphast fuzz: property failed/ { verdict = "alphast: a check of the target failed"; exit }
    /runtime error:/ { verdict = "alphast: UBSan report"; exit }
    /ERROR: LeakSanitizer/ { verdict = "alphast: a leak"; exit }
    /ERROR: libFuzzer: fuzz target exited/ { verdict = "alphast: the process exited"; exit }
    /ERROR: libFuzzer: deadly signal/ { verdict = "alphast: a deadly signal"; exit }
    /ERROR: AddressSanitizer: / && !kind { kind = $0; sub(/.*AddressSanitizer: /, "", kind); sub(/ .*/, "", kind); main = 1; next }
    /caused by a READ/ { read = 1 }
    # the first frame that is not libc or a sanitizer interceptor
    main && /^ *#[0-9]+ / && !code && $0 !~ /libc\.so|sysdeps|__interceptor_|__asan_|in (malloc|calloc|realloc|memcpy|memmove|memset) / { code = $0 }
    main && /^ *#1 / && !second { second = $0 }
    /(allocated|freed) by thread/ { main = 0; alloc = 1; next }
    alloc && /^ *#1 / && !owner { owner = $0; alloc = 0 }
    END {
      if (verdict) { print verdict; exit }
      if (!kind) { print "alphast: a crash without a sanitizer report"; exit }
      if (owner) { print (owner ~ /libhdf5/ ? "libhdf5: " : "alphast: ") kind " on memory " (owner ~ /libhdf5/ ? "libhdf5" : "alphast") " allocated"; exit }
      if (kind ~ /allocation-size-too-big|calloc-overflow|out-of-memory|requested-allocation/) { print (second ~ /libhdf5/ ? "libhdf5: " : "alphast: ") kind; exit }
      if (kind == "SEGV" && read) { print (code ~ /libhdf5/ ? "libhdf5: " : "alphast: ") "SEGV reading in " (code ~ /libhdf5/ ? "libhdf5" : "alphast"); exit }
      print "alphast: " kind
    }'
}

run_target() { # name
  local t=$1 exe="$build/fuzz/fuzz_$1" corpus="$work/corpus/$1" log="$work/fuzz_$1.log"
  local art="$findings/$1/" tmp="$work/tmp/$1" seg="$work/fuzz_$1.segment" triage="$work/fuzz_$1.triage"
  mkdir -p "$corpus" "$art" "$tmp"
  : >"$log"
  : >"$triage"
  # The work copy starts with the committed seeds (and keeps what earlier runs found).
  cp -n "$top/tests/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null || true
  local dict=()
  [ -f "$top/tests/fuzz/$t.dict" ] && dict=("-dict=$top/tests/fuzz/$t.dict")
  local left=$seconds restarts=0 rc began verdict
  while :; do
    began=$SECONDS
    rc=0
    # -error_exitcode marks findings apart from other failures. The targets'
    # temporary files go to $tmp, removed afterwards even after a crash.
    # shellcheck disable=SC2046,SC2086
    (cd "$work" && TMPDIR=$tmp \
      ASAN_OPTIONS="${ASAN_OPTIONS:-$(asan_options "$t")}" \
      UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
      LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$top/tests/fuzz/lsan.supp}" \
      "$exe" "${dict[@]}" -max_total_time="$left" -timeout="$timeout" -rss_limit_mb="$rss" -malloc_limit_mb="$rss" \
      -print_final_stats=1 -artifact_prefix="$art" -error_exitcode=77 -timeout_exitcode=78 \
      $(target_args "$t") ${FUZZ_ARGS:-} "$corpus" "$top/tests/fuzz/corpus/$t" >"$seg" 2>&1) || rc=$?
    cat "$seg" >>"$log"
    rm -rf "${tmp:?}"/*
    left=$((left - (SECONDS - began)))
    # The sweep sandbox's wall-clock backstop ends the process, by design,
    # when one library call (a string pattern that backtracks) outlasts it:
    # the sandbox working, not a finding. Counted; fuzzing goes on.
    if ((rc != 0)) && grep -q 'stuck inside a library function' "$seg"; then
      echo "watchdog:	$(grep -m1 'stuck inside' "$seg")" >>"$triage"
      restarts=$((restarts + 1))
      if ((left > 0 && restarts < 100)); then continue; fi
      rc=0
      break
    fi
    # Fork mode: the parent exits with its last job's status, an ignored
    # timeout's too; a crash comes with "log from the inner process".
    grep -q '^INFO: -fork=' "$seg" || break
    if ! grep -q '^INFO: log from the inner process' "$seg"; then
      grep -q '^INFO: exiting: .* time:' "$seg" && rc=0
      break
    fi
    verdict=$(sed -n '/^INFO: log from the inner process/,$p' "$seg" | classify)
    echo "$verdict	$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$seg" | tail -1)" >>"$triage"
    case $verdict in libhdf5:*) ;; *) rc=77; break ;; esac
    restarts=$((restarts + 1))
    ((left > 0 && restarts < 100)) || { rc=0; break; }
  done
  rm -rf "$tmp" "$seg"
  return $rc
}

summarise() { # name status
  local t=$1 rc=$2 log="$work/fuzz_$1.log" triage="$work/fuzz_$1.triage"
  local execs speed cov ft ignored="" ooms touts lib
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if grep -q '^INFO: -fork=' "$log"; then
    # Fork mode, maybe in several runs: each parent's last status line,
    # "#EXECS: cov: .. oom/timeout/crash: a/b/c ..", summed.
    read -r execs ooms touts <<<"$(awk '
      /^INFO: -fork=1: fuzzing in separate/ { e += le; o += lo; t += lt; le = lo = lt = 0 }
      /^#[0-9]+: cov:/ { le = substr($1, 2) + 0; split($0, a, "oom/timeout/crash: "); split(a[2], c, "[/ ]"); lo = c[1]; lt = c[2] }
      END { print e + le, o + lo, t + lt }' "$log")"
    speed=$((execs / seconds))
    lib=$(grep -c '^libhdf5:' "$triage" 2>/dev/null || true)
    ((ooms + touts + ${lib:-0} == 0)) ||
      ignored=", libhdf5's: $touts timeouts, $ooms out-of-memory, ${lib:-0} crashes (in $findings/$t)"
  fi
  local stops
  stops=$(grep -c '^watchdog:' "$triage" 2>/dev/null || true)
  ((${stops:-0} == 0)) || ignored="$ignored, the sandbox's wall-clock backstop stopped $stops scripts"
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if ((rc == 0)); then
    printf 'alphast fuzz: %-12s ok   %s execs (%s/s), cov %s, ft %s, %s s%s\n' "$t" "${execs:-?}" "${speed:-?}" \
      "${cov:-?}" "${ft:-?}" "$seconds" "$ignored"
    return 0
  fi
  printf 'alphast fuzz: %-12s FAILED (exit %s) after %s execs; the log: %s\n' "$t" "$rc" "${execs:-?}" "$log"
  grep -vE '^(libhdf5|watchdog):' "$triage" 2>/dev/null | sed 's/	.*//; s/^/    /' || true
  # The sanitizer's, libFuzzer's or the target's report (the last one), then the reproducer.
  local first
  first=$(grep -n -E '^(==[0-9]+==ERROR|.*runtime error:|ALARM|alphast fuzz: property)' "$log" | tail -1 | cut -d: -f1)
  [ -n "$first" ] && sed -n "${first},$((first + 30))p" "$log" | sed 's/^/    /'
  local repro
  repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  if [ -n "$repro" ]; then
    echo "    reproducer: $repro"
    echo "    replay:     $build/fuzz/fuzz_$t $repro"
  fi
  return 1
}

[ "${FUZZ_NO_BUILD:-0}" = 1 ] || build_targets
mkdir -p "$work" "$findings"
echo "alphast fuzz: ${targets[*]}, $seconds s each, $jobs at a time (work corpora in $work/corpus)"
running=0
for t in "${targets[@]}"; do
  rm -f "$work/fuzz_$t.rc"
  (
    rc=0
    run_target "$t" || rc=$?
    echo "$rc" >"$work/fuzz_$t.rc"
  ) &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait
status=0
for t in "${targets[@]}"; do
  summarise "$t" "$(cat "$work/fuzz_$t.rc" 2>/dev/null || echo 1)" || status=1
done
exit $status
