#!/bin/bash
# The test command of the README: installs what is needed, builds, and runs every test:
# the normal build, then ASan+UBSan, then TSan (the ring buffer and collector under threads, and
# the viewer's index, built on several threads).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1
failed=0
# Each phase says when it starts, in seconds since the command began, so a slow phase is named.
phase() { echo "=== [$(date -u +%H:%M:%S), ${SECONDS} s] $*"; }
# A real Jaeger v2 for tests/jaeger_test.cpp (label peer), built once from the Go module proxy into
# a cache directory later runs reuse (tests/peers/jaeger; about 10 minutes of CPU the first time).
# It builds beside the C++ builds, at a lower priority, so that it takes the cores they leave
# idle (links, test runs); the last suite, which runs the peer tests, waits for it.
phase "Jaeger (tests/peers/jaeger/build.sh, in the background)"
mkdir -p build
nice -n 10 bash tests/peers/jaeger/build.sh >build/jaeger-build.log 2>&1 &
jaeger_build=$!
# Every C++ file as clang-format (Debian's, .clang-format) writes it; bench/lttng_tp.h is LTTng's
# tracepoint-provider macro layout and stays as LTTng documents it.
phase "clang-format"
if ! git ls-files '*.cpp' '*.hpp' '*.h' | grep -v '^bench/lttng_tp.h$' | xargs clang-format --dry-run --Werror; then
  echo "clang-format: the files above differ from their formatted text (clang-format -i FILE)"
  failed=1
fi
# Debug information of line tables only (-g1): what a sanitizer's or a failed test's stack trace
# needs, at a third less compile time than -g on this code. A developer's build/ keeps -g.
kLineTablesOnly="-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
# Builds all targets, or what the tests of the labels need (chronicle_tests_<label>,
# tests/CMakeLists.txt), then runs the tests of the labels.
run_suite() {  # name, build dir, ctest label regex, all|labels, cmake args...
  local name=$1 dir=$2 labels=$3 build=$4 targets=""
  shift 4
  if [ "$build" = labels ]; then
    targets=$(echo "$labels" | tr '|' '\n' | sed 's/^/chronicle_tests_/' | tr '\n' ' ')
  fi
  phase "$name: build ($dir)"
  mkdir -p "$dir"
  if ! TARGETS="$targets" bash scripts/build.sh "$dir" -DCHRONICLE_BUILD_BENCH=OFF "$kLineTablesOnly" "$@" \
    >"$dir/build.log" 2>&1; then
    tail -50 "$dir/build.log"
    failed=1
    return
  fi
  phase "$name: tests"
  (cd "$dir" && ctest --output-on-failure -j2 --timeout 300 -L "$labels") || failed=1
}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# The sanitizer suites build their libraries and programs as unity builds (a few sources compiled
# as one, so the templates they share are instantiated and instrumented once, not per file); the
# tests' own files compile one by one (tests/CMakeLists.txt). A developer's build/ is not unity.
kUnity="-DCMAKE_UNITY_BUILD=ON"
run_suite "ASan+UBSan" build-asan "unit|cli|metrics|task|analysis|export|merge|netns" labels -DCHRONICLE_SANITIZE=address,undefined \
  -DCHRONICLE_SANITIZE_OPTIMIZE=-O0 "$kUnity"
run_suite "TSan" build-tsan "unit|metrics|task|index" labels -DCHRONICLE_SANITIZE=thread "$kUnity"
# Every reader entry point under libFuzzer for a bounded time (clang).
JOBS=2 run_suite "fuzz" build-fuzz "fuzz" labels -DCMAKE_CXX_COMPILER=clang++ -DCHRONICLE_FUZZ=ON -DCHRONICLE_BUILD_TESTS=OFF \
  -DCHRONICLE_BUILD_EXAMPLES=OFF "-DCHRONICLE_SANITIZE=address,undefined,fuzzer-no-link"
phase "Jaeger: waiting for its build"
if ! wait $jaeger_build; then
  tail -20 build/jaeger-build.log
  echo "chronicle: no Jaeger: its tests will skip and say why"
fi
# Last, so the output ends with the summary of the whole suite.
run_suite "all tests" build "." all
exit $failed
