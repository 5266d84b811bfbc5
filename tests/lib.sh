# Shared by the shell test scripts (source it): the build folder, a scratch folder removed on
# exit, single-threaded runs (bit-reproducible numbers), and the ok/bad counters whose summary
# line "NAME: N passed, N failed" ends each script.
set -u
B=${1:-build}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
pass=0; fail=0
ok()     { pass=$((pass+1)); echo "  ok   $1"; }
bad()    { fail=$((fail+1)); echo "  FAIL $1"; }
finish() { echo "$1: $pass passed, $fail failed"; [ $fail -eq 0 ]; }
