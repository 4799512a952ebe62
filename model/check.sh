#!/usr/bin/env bash
# Model-checks claim.pml with spin: the model must satisfy every property,
# and every mutant (one -D macro, one changed line) must be rejected with a
# counterexample against the property it targets. Fails otherwise.
#
#   model/check.sh            the model (safety, then liveness under weak
#                             fairness), then every mutant
#   FAULTS=2 model/check.sh   a larger fault budget (much slower)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
FAULTS=${FAULTS:-1}

for tool in spin gcc; do
  command -v "$tool" >/dev/null || { echo "check.sh needs $tool (Debian: apt-get install -y spin gcc)"; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/claim.pml" "$work/"
cd "$work"

# verify MODE DEFINES...: builds and runs the verifier; MODE is safety
# (assertions, exhaustive) or liveness (the LTL formula, weak fairness).
# Prints spin's summary; leaves claim.pml.trail on a counterexample.
verify() {
  local mode=$1 opt=-O2; shift
  [ $# -gt 0 ] && opt=-O0 # a mutant: a short search, so a quick build
  rm -f claim.pml.trail pan pan.c
  spin -a -DFAULTS="$FAULTS" "$@" claim.pml >/dev/null
  if [ "$mode" = safety ]; then
    gcc $opt -w -DSAFETY -DNOCLAIM -DVECTORSZ=512 -DCOLLAPSE -o pan pan.c
    ./pan -m1000000 -E -w24 2>&1 | grep -vE '^(Depth|pan: wrote)'
  else
    gcc $opt -w -DNOREDUCE -DNFAIR=3 -DVECTORSZ=512 -DCOLLAPSE -o pan pan.c
    ./pan -m2000000 -a -f -E -w25 2>&1 | grep -vE '^(Depth|pan: wrote)'
  fi
}

# broken DEFINES...: the property a counterexample breaks, from its trail.
broken() {
  if grep -q 'acceptance cycle' out.txt; then
    echo P8
  else
    spin -t -DFAULTS="$FAULTS" "$@" claim.pml | grep -o 'PROPERTY P[0-9]' | head -1 | cut -d' ' -f2
  fi
}

summary() { grep -E 'errors:|states, stored|transitions \(|elapsed time' out.txt | sed 's/^ */    /'; }

fail=0
for mode in safety liveness; do
  echo "==> the model, $mode (FAULTS=$FAULTS)"
  start=$(date +%s)
  verify "$mode" > out.txt
  summary
  echo "    $(( $(date +%s) - start )) s"
  if ! grep -q 'errors: 0' out.txt || [ -f claim.pml.trail ]; then
    echo "FAIL: the model violates $(broken) ($mode); replay: spin -t -p -DFAULTS=$FAULTS claim.pml"
    spin -t -p -DFAULTS="$FAULTS" claim.pml | tail -40 || true
    fail=1
  fi
done

# name|property|mode|what the one changed line does[|the fault budget it needs at least]
mutants='M1|P1|safety|a fenced Complete that fails still commits the local writes of its transaction
M2|P2|safety|a claim takes over a completed record whose lease ran out (the state checked after the lease)
M3|P3|safety|a Complete whose reply was lost is taken as stored
M4|P4|safety|no attempt in the fence of Complete (the generation only)
M5A|P5|safety|a stopping consumer gives back the broker'"'"'s last delivery
M5B|P5|safety|the consumer acks before the outcome is stored
M5C|P5|safety|the last delivery is claimed without the started mark
M5D|P5|safety|a claim of the last delivery that finds the record held without the started mark writes nothing|2
M6|P6|safety|the claim reads the clock before its snapshot
M7|P7|safety|the Work'"'"'s lease deadline runs from a clock read after the claim
M8|P8|liveness|a claim that creates the record with the started mark leaves it out of the index of started records (MemoryStore.Claim without track)'

base=$FAULTS
while IFS='|' read -r name prop mode what need; do
  FAULTS=$(( ${need:-0} > base ? need : base ))
  echo "==> mutant $name ($what): expect $prop broken (FAULTS=$FAULTS)"
  verify "$mode" "-D$name" > out.txt || true
  if [ -f claim.pml.trail ] || grep -q 'acceptance cycle' out.txt; then
    got=$(broken "-D$name")
    if [ "$got" = "$prop" ]; then
      echo "    rejected: breaks $got ($(grep -oE 'depth reached [0-9]+' out.txt | head -1), counterexample found)"
    else
      echo "FAIL: mutant $name breaks ${got:-nothing named}, not $prop"
      fail=1
    fi
  else
    echo "FAIL: mutant $name passes: the model cannot tell it from the protocol"
    summary
    fail=1
  fi
done <<< "$mutants"

if [ "$fail" != 0 ]; then
  echo "model check FAILED"
  exit 1
fi
echo "model check passed: the model satisfies P1-P8 and every mutant is rejected"
