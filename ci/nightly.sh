#!/usr/bin/env bash
# Nightly: measure everything again, render the register, audit the answers, compare with
# the last good night's manifests and raw samples, publish JUnit and a markdown summary, and
# keep the history (trend figures with change points).
#
# Exit codes: 0 fine, 1 a run failed, 2 nothing comparable, 3 a layout (or a new night)
# changed an answer, 4 a figure REGRESSED, a run went missing or now fails, or the machine
# differs from the baseline's; 130/143 when interrupted.
#
# Environment: PARLAB_NIGHTLY_STATE (default .parlab/nightly) holds last-good/, history/ and
# out/ (junit.xml, summary.md, nightly.json); NIGHTLY_SPECS (default experiments) is the specs
# measured; PARLAB_MANIFESTS (default manifests) where tonight's manifests go; PARLAB_BIN a
# parlab binary to use instead of building one (`make build`); NIGHTLY_ARGS adds flags to `parlab nightly`
# (e.g. "--min-effect 0.15 --fdr 0.01"); NIGHTLY_LAUNCHES (default 7) is how many times every
# run is launched, the replicates the verdicts compare (README "Nightly": choosing k); NIGHTLY_REBASELINE=1 takes tonight as the next
# baseline even when the comparison failed (see step 4). On GitHub Actions the summary is appended to
# $GITHUB_STEP_SUMMARY; point the CI's JUnit publisher at out/junit.xml.
set -uo pipefail
# Paths given relative to where the job was started are made absolute before it moves to the
# project folder.
absolute() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
for var in PARLAB_NIGHTLY_STATE PARLAB_MANIFESTS PARLAB_BIN PARLAB_STATE; do
  [ -n "${!var:-}" ] && export "$var=$(absolute "${!var}")"
done
if [ -n "${NIGHTLY_SPECS:-}" ]; then
  specs=()
  for spec in $NIGHTLY_SPECS; do specs+=("$(absolute "$spec")"); done
  NIGHTLY_SPECS="${specs[*]}"
fi
cd "$(dirname "$0")/.."
STATE=${PARLAB_NIGHTLY_STATE:-.parlab/nightly}
LAST_GOOD=$STATE/last-good
HISTORY=$STATE/history
OUT=$STATE/out
SPECS=${NIGHTLY_SPECS:-experiments}
export PARLAB_MANIFESTS=${PARLAB_MANIFESTS:-manifests}
mkdir -p "$HISTORY" "$OUT"
# A night cut off between the two renames of step 4 left its old baseline aside: put it back.
if [ ! -e "$LAST_GOOD" ] && [ -d "$LAST_GOOD.old" ]; then
  mv "$LAST_GOOD.old" "$LAST_GOOD" && echo "nightly: restored the last good night from $LAST_GOOD.old"
fi
rm -f "$OUT"/junit.xml "$OUT"/summary.md "$OUT"/nightly.json
if [ -n "${PARLAB_BIN:-}" ]; then
  PARLAB=$PARLAB_BIN
else
  make build >/dev/null || exit 1
  PARLAB=target/release/parlab
fi

# 1. Measure (--force: a night measures again even where the measuring code is unchanged;
#    each run launched NIGHTLY_LAUNCHES times, once per round of the suite) and render the
#    register (reports/evidence.md).
# shellcheck disable=SC2086
"$PARLAB" run --force --launches "${NIGHTLY_LAUNCHES:-7}" $SPECS
run_rc=$?
[ "$run_rc" -ge 128 ] && exit "$run_rc"

# 2. Audit answers across layouts (exit 3 on a real change).
"$PARLAB" audit --manifests "$PARLAB_MANIFESTS"
audit_rc=$?

# 3. Compare with the last good night (manifests, with each launch's medians), write JUnit
#    and the summary; the history gives each figure's noise band, then tonight is appended.
if ! ls "$LAST_GOOD"/*.json >/dev/null 2>&1; then
  echo "nightly: first night (no last good night in $LAST_GOOD); tonight becomes the baseline if it passes"
  nightly_rc=0
else
  # One comparison writes all of them (a second call would judge without the history's noise
  # bands, or append tonight to the history twice): the JSON to out/nightly.json, the summary
  # to the log.
  # shellcheck disable=SC2086
  "$PARLAB" nightly --baseline "$LAST_GOOD" --manifests "$PARLAB_MANIFESTS" \
    --junit "$OUT/junit.xml" --summary "$OUT/summary.md" --history "$HISTORY" --json ${NIGHTLY_ARGS:-} \
    >"$OUT/nightly.json"
  nightly_rc=$?
  # A comparison that stopped before judging (exit 2) printed no JSON: no empty file is left.
  [ -s "$OUT/nightly.json" ] || rm -f "$OUT/nightly.json"
  [ -f "$OUT/summary.md" ] && cat "$OUT/summary.md"
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$OUT/summary.md" ]; then
    cat "$OUT/summary.md" >>"$GITHUB_STEP_SUMMARY"
  fi
fi

# 4. A night that passed everything is the next night's baseline. After a deliberate change
#    (experiments added or removed: MISSING or nothing comparable; a new runner: MACHINE
#    DIFFERS) set NIGHTLY_REBASELINE=1 for one night to take tonight as the baseline anyway.
if [ "$run_rc" -eq 0 ] && [ "$audit_rc" -eq 0 ] && { [ "$nightly_rc" -eq 0 ] || [ "${NIGHTLY_REBASELINE:-0}" = 1 ]; }; then
  # Renames only between two complete baselines: a cut-off leaves one of them in place or aside.
  rm -rf "$LAST_GOOD.new" "$LAST_GOOD.old" && mkdir -p "$LAST_GOOD.new" && cp -a "$PARLAB_MANIFESTS"/. "$LAST_GOOD.new"/ &&
    { [ ! -e "$LAST_GOOD" ] || mv "$LAST_GOOD" "$LAST_GOOD.old"; } && mv "$LAST_GOOD.new" "$LAST_GOOD" && rm -rf "$LAST_GOOD.old"
  echo "nightly: tonight is the new last good night ($LAST_GOOD)"
fi

# The most telling exit code wins: a changed answer (3) from either check, then a finding (4),
# then the first other failure (2: nothing comparable, say, beside an audit's 3 would hide it).
for want in 3 4; do
  for rc in "$nightly_rc" "$audit_rc" "$run_rc"; do
    [ "$rc" -eq "$want" ] && exit "$want"
  done
done
for rc in "$nightly_rc" "$audit_rc"; do
  [ "$rc" -ne 0 ] && exit "$rc"
done
exit "$run_rc"
