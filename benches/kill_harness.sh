#!/usr/bin/env bash
# Exactly once under SIGKILL (issue 14): runs a script of short shell steps, kills mekara with
# SIGKILL at random moments (its steps' shells live on, as after a crash), resumes after each
# kill, and lets the last resume finish. Then it counts, over every run:
#
#   kills        SIGKILLs that landed while mekara was running
#   overlapping  a step that started while an earlier copy of itself was still running
#                (must be 0: a resume kills the orphaned group before it runs the step again)
#   rerun        a journaled step that started again after a kill (must be 0: what the
#                journal holds is never run twice)
#   again        a step that finished twice; allowed only for a step whose result was not
#                journaled yet: its mekara was killed while it ran and it finished on its own
#                before the resume (or was killed between its end and the journal write)
#   unfinished   a step that never finished in a run that mekara reports as completed (must
#                be 0)
#
#   bash benches/kill_harness.sh [MEKARA] [RUNS] [KILLS_PER_RUN] [LOAD] [STORE] [TARGET]
#
# MEKARA (default: target/release/mekara) is the binary tested; RUNS (default 20) runs of 8
# rounds each; up to KILLS_PER_RUN (default 8) kills per run; LOAD (default 0) busy loops kept
# running meanwhile, so that mekara is descheduled at any point (the kill window it once had
# showed only under load); STORE (default `files`) is where runs are kept: `files`, or `pg`
# for a PostgreSQL server started here (benches/common/pg.sh; MEKARA_STORE_URL names another).
# TARGET (default `mekara`) is what is killed: `mekara`, or `child` for mekara's evaluator child
# (`mekara __evaluate`, the bigger process, which the kernel's OOM killer would pick) while
# mekara runs on: mekara then journals the step it ran for the child, ends interrupted, and
# the resume goes on (issue 40: the step was run again). With `child`, `again` must be 0 too:
# mekara itself is never killed, so every step it started ends under it and is journaled.
# A round is a pure function step (which the PostgreSQL store holds back for the next write),
# the shell step counted here, and an llm step answered by an agent command (held by a warm
# evaluator between steps), so the kills land in all three. Loopback only: nothing leaves the
# machine. Time: about RUNS x 3 s.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mekara=${1:-$repo/target/release/mekara}
runs=${2:-20}
kills_per_run=${3:-8}
load=${4:-0}
store=${5:-files}
target=${6:-mekara}
case $target in mekara | child) ;; *) echo "TARGET is mekara or child, not $target" >&2; exit 2 ;; esac
[ -x "$mekara" ] || { echo "no mekara binary at $mekara: cargo build --release" >&2; exit 2; }
mekara=$(cd "$(dirname "$mekara")" && pwd)/$(basename "$mekara")
work=$(mktemp -d)
burners=()
PGPID=
trap 'pkill -KILL -f "$work/step.sh" 2>/dev/null || true; for b in "${burners[@]}"; do kill "$b" 2>/dev/null || true; done; [ -z "$PGPID" ] || kill "$PGPID" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 "$load"); do
  (while :; do :; done) &
  burners+=($!)
done

# A step: says if an earlier copy of itself still runs, notes its pid, works ~0.1-0.3 s.
cat >"$work/step.sh" <<'EOF'
#!/bin/sh
log=$1 i=$2
# Alive, and not a zombie that nobody reaped yet (an orphan's parent here may not reap).
if [ -f "$log.pid.$i" ]; then
  old=$(cat "$log.pid.$i")
  state=$(cut -d')' -f2 "/proc/$old/stat" 2>/dev/null | cut -d' ' -f2)
  if [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]; then
    echo "overlap $i $old $state" >>"$log"
  fi
fi
echo $$ >"$log.pid.$i"
echo "start $i" >>"$log"
sleep 0.$(( ($$ % 3) + 1 ))
echo "end $i" >>"$log"
EOF
project=$work/project
mkdir -p "$project/.mekara/scripts/nl" "$project/.mekara/scripts/compiled" "$work/home"
echo "Run eight short steps." >"$project/.mekara/scripts/nl/steps.md"
cat >"$project/.mekara/scripts/compiled/steps.star" <<EOF
def double(x):
    return x * 2

def execute(request):
    n = 0
    for i in range(8):
        n = auto(double, {"x": n + i}).value
        auto("sh $work/step.sh " + request + " " + str(i))
        llm("Say a word for round %d (%d)." % (i, n), expects = {"word": "a word"})
EOF
printf '{"outputs": {"word": "yes"}}\n' >"$work/answer.json"
agent=(--agent-command "cat $work/answer.json")
export HOME=$work/home
case $store in
  files) ;;
  pg)
    TMP=$work
    . "$repo/benches/common/pg.sh"
    export MEKARA_STORE_URL=$URL
    (cd "$project" && "$mekara" store migrate >/dev/null)
    ;;
  *) echo "STORE is files or pg, not $store" >&2; exit 2 ;;
esac

# The ids of the runs, one a line.
run_ids() {
  if [ "$store" = pg ]; then
    "$PG/psql" "$URL" -Atc "SELECT id FROM mekara_runs ORDER BY id" 2>/dev/null
  else
    ls "$project/.mekara/runs" 2>/dev/null | grep '\.jsonl$' | sed 's/\.jsonl$//'
  fi
}

# The journal of run $1, its lines.
journal_of() {
  if [ "$store" = pg ]; then
    "$PG/psql" "$URL" -Atc "SELECT body FROM mekara_events WHERE run_id = '$1' ORDER BY line" 2>/dev/null
  else
    cat "$project/.mekara/runs/$1.jsonl" 2>/dev/null
  fi
}

# The id of the run that is not among the ids listed in $1.
new_run() {
  comm -13 <(echo "$1") <(run_ids) | head -1
}

random_delay() { awk -v seed="$RANDOM" 'BEGIN { srand(seed); printf "%.3f", rand() * 0.6 }'; }

kills=0 overlapping=0 rerun=0 again=0 unfinished=0 completed=0
started=$(date +%s)
for run in $(seq 1 "$runs"); do
  log=$work/log.$run
  : >"$log"
  before=$(run_ids || true)
  (cd "$project" && exec "$mekara" run "${agent[@]}" steps "$log" </dev/null >/dev/null 2>&1) &
  pid=$!
  id=
  for _ in $(seq 1 "$kills_per_run"); do
    sleep "$(random_delay)"
    if [ "$target" = child ]; then
      # The evaluator children of this mekara (of no other process); none between two
      # evaluations, when the kill is tried again later.
      kids=$(pgrep -P "$pid" -f __evaluate 2>/dev/null || true)
      if [ -z "$kids" ]; then
        if kill -0 "$pid" 2>/dev/null; then continue; fi
      elif kill -KILL $kids 2>/dev/null; then
        kills=$((kills + 1))
      fi
    elif kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null; then
      kills=$((kills + 1))
    fi
    wait "$pid" 2>/dev/null || true
    # This run's journal: the one that was not there before it started. A kill before mekara
    # created it leaves none, and the run is started again.
    [ -n "$id" ] || id=$(new_run "$before")
    if [ -z "$id" ]; then
      (cd "$project" && exec "$mekara" run "${agent[@]}" steps "$log" </dev/null >/dev/null 2>&1) &
      pid=$!
      continue
    fi
    # What the journal held when mekara died (its shell steps), and how far the steps' log
    # was then.
    journaled=$(journal_of "$id" | grep '"event":"step"' | grep -c '"kind":"shell"' || true)
    echo "$(wc -l <"$log") ${journaled:-0}" >>"$log.marks"
    state=$(cd "$project" && "$mekara" runs 2>/dev/null | grep -F "$id" || true)
    case $state in
      *completed*) break ;;
      *"stopped before its script started"*)
        # Killed after it made the run and before the script began: nothing to resume, so
        # the script is started again, as a person would.
        before=$(run_ids || true) id=
        (cd "$project" && exec "$mekara" run "${agent[@]}" steps "$log" </dev/null >/dev/null 2>&1) &
        pid=$!
        continue
        ;;
    esac
    (cd "$project" && exec "$mekara" run "${agent[@]}" --resume "$id" </dev/null >/dev/null 2>&1) &
    pid=$!
  done
  wait "$pid" 2>/dev/null || true
  [ -n "$id" ] || id=$(new_run "$before")
  if [ -z "$id" ]; then
    (cd "$project" && "$mekara" run "${agent[@]}" steps "$log" </dev/null >/dev/null 2>&1) || true
    id=$(new_run "$before")
  fi
  # The last resume runs to the end, unkilled.
  state=$(cd "$project" && "$mekara" runs 2>/dev/null | grep -F "$id" || true)
  case $state in
    *completed*) ;;
    *) (cd "$project" && "$mekara" run "${agent[@]}" --resume "$id" </dev/null >/dev/null 2>&1) || true ;;
  esac
  state=$(cd "$project" && "$mekara" runs 2>/dev/null | grep -F "$id" || true)
  done_run=0
  case $state in
    *completed*) completed=$((completed + 1)) done_run=1 ;;
    *) echo "run $run did not complete: ${state:-not listed}" >&2
       [ -z "${KILL_HARNESS_KEEP:-}" ] || { journal_of "$id" | tail -5 >&2; (cd "$project" && "$mekara" run "${agent[@]}" --resume "$id" </dev/null 2>&1 | tail -20) >&2; } ;;
  esac
  overlapping=$((overlapping + $(grep -c '^overlap' "$log" || true)))
  # A step the journal held at a kill must not start again after it.
  while read -r lines journaled; do
    rerun=$((rerun + $(tail -n +"$((lines + 1))" "$log" |
      awk -v j="$journaled" '$1 == "start" && $2 < j' | wc -l)))
  done < <(cat "$log.marks" 2>/dev/null || true)
  for i in 0 1 2 3 4 5 6 7; do
    ends=$(grep -c "^end $i\$" "$log" || true)
    if [ "$ends" -gt 1 ]; then again=$((again + ends - 1)); fi
    if [ "$ends" -eq 0 ] && [ "$done_run" = 1 ]; then unfinished=$((unfinished + 1)); fi
  done
done
elapsed=$(( $(date +%s) - started ))
printf 'target %s  store %s  runs %d (completed %d)  kills %d  overlapping %d  rerun %d  again %d  unfinished %d  load %d  (%d s)\n' \
 "$target" "$store" "$runs" "$completed" "$kills" "$overlapping" "$rerun" "$again" "$unfinished" "$load" "$elapsed"
