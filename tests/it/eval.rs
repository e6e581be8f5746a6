//! `mekara eval`: trials of a script's cases run by `--agent-command` stand-ins whose success
//! is known (decided by the trial's number, `MEKARA_EVAL_TRIAL`), so the reported pass rate,
//! its interval, the caps, the resume after a kill and the baseline comparison can be
//! checked against what must come out.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::common::Project;

/// Writes a greeting file, checked by its last step.
const GREET: &str = r#"
def execute(request):
    llm("Write the greeting for " + request + " into hello.txt.", expects = {"done": "yes when written"})
    auto("test -f hello.txt", context = "Check the greeting")
"#;

/// The stand-in agent: the judge's question is answered `pass`; an NL script (the baseline)
/// is always done; an llm step is done for 7 repetitions of every 10 (`7n mod 10 < 7`), and
/// answered without doing it for the others (the script's check then fails). Each call is
/// logged with its trial, and costs $0.01 and 110 tokens. `block` makes trial 3 hang.
const AGENT: &str = r#"req=$(cat)
echo "$MEKARA_EVAL_TRIAL $MEKARA_EVAL_VARIANT" >> "$LOG"
case "$req" in
  *Rubric:*) echo '{"outputs": {"verdict": "pass", "why": "it greets"}}'; exit 0;;
esac
if [ "$MEKARA_EVAL_TRIAL" = 3 ] && [ -f "$BLOCK" ]; then touch "$BLOCK.started"; sleep 60; fi
case "$req" in
  *'"kind":"nl"'*) echo hello > hello.txt; echo '{"outputs": {}, "cost_usd": 0.02}'; exit 0;;
esac
if [ $(( MEKARA_EVAL_REPEAT * 7 % 10 )) -lt 7 ]; then echo hello > hello.txt; fi
echo '{"outputs": {"done": "yes"}, "cost_usd": 0.01, "input_tokens": 100, "output_tokens": 10}'
"#;

const CASES: &str = r#"
[[case]]
name = "hello"
arguments = "world"
checks = ["grep -q hello hello.txt"]
[case.fixture]
dir = "fixtures/empty"
git = true
"#;

fn project() -> Project {
    let project = Project::new();
    project.script(
        "greet",
        "Write a greeting for $ARGUMENTS into hello.txt.\n",
        Some(GREET),
    );
    project.write("fixtures/empty/README", "a fixture\n");
    project.write("cases.toml", CASES);
    project.write("agent.sh", AGENT);
    project
}

/// `mekara eval ARGS` with the stand-in agent.
fn eval(project: &Project, args: &[&str]) -> std::process::Command {
    let agent = format!("sh {}", project.root().join("agent.sh").display());
    let mut command = stand_in(project, &["eval"]);
    command.args(args).args(["--agent-command", &agent]);
    command
}

/// Runs `mekara eval ARGS` with the stand-in agent, to its end.
fn eval_run(project: &Project, args: &[&str]) -> crate::common::Run {
    crate::common::run_with_stdin(eval(project, args), "")
}

/// Runs `mekara eval greet --cases cases.toml --trials TRIALS MORE…` with the stand-in.
fn greet(project: &Project, trials: &str, more: &[&str]) -> crate::common::Run {
    let args = ["greet", "--cases", "cases.toml", "--trials", trials];
    eval_run(project, &[&args[..], more].concat())
}

/// `mekara ARGS` with the stand-in's files in its environment.
fn stand_in(project: &Project, args: &[&str]) -> std::process::Command {
    let mut command = project.command(args);
    command
        .env("LOG", project.root().join("agent.log"))
        .env("BLOCK", project.root().join("block"));
    command
}

fn summary_of(project: &Project) -> Json {
    let evals = project.root().join(".mekara/evals");
    let id = std::fs::read_dir(&evals)
        .expect("an eval folder")
        .flatten()
        .next()
        .expect("one eval")
        .file_name();
    let text = std::fs::read_to_string(evals.join(id).join("summary.json")).expect("summary");
    serde_json::from_str(&text).expect("JSON")
}

/// The agent log's lines: `TRIAL VARIANT` per call.
fn calls(project: &Project) -> Vec<String> {
    std::fs::read_to_string(project.root().join("agent.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn in_interval(row: &Json, rate: f64) {
    let (low, high) = (
        row["low"].as_f64().expect("low"),
        row["high"].as_f64().expect("high"),
    );
    assert!(
        low <= rate && rate <= high,
        "{rate} not in {low}..{high}: {row}"
    );
}

#[test]
fn the_pass_rate_of_a_stand_in_that_passes_7_trials_in_10_is_reported_with_its_interval() {
    let project = project();
    let run = greet(&project, "10", &["--jobs", "2"]);
    insta::with_settings!({filters => vec![(r"\d+\.\d s", "[S] s"), (r"\[\d+/10\] #\d+ .*\n", "")]}, {
        insta::assert_snapshot!(project.transcript(&run));
    });
    let summary = summary_of(&project);
    let all = &summary["rows"][0];
    assert_eq!(
        (all["passed"].as_u64(), all["trials"].as_u64()),
        (Some(7), Some(10))
    );
    in_interval(all, 0.7);
    // The failures are the trials whose agent did not write the file, at the step that
    // checks it.
    assert_eq!(summary["failures"][0]["step"], "greet[1]");
    assert_eq!(
        summary["failures"][0]["trials"],
        serde_json::json!([1, 4, 7])
    );
    // Each trial is a run of the project's store.
    let runs = project.run(&["runs"], "").stdout;
    assert_eq!(runs.matches("-t00").count(), 10, "{runs}");
}

#[test]
fn a_trial_over_its_time_or_cost_cap_is_stopped_and_counted_as_capped() {
    let project = project();
    std::fs::write(project.root().join("block"), "").expect("block");
    let started = Instant::now();
    let run = greet(&project, "3", &["--trial-timeout", "2s"]);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the hung trial was not stopped"
    );
    run.expect_code(0);
    let summary = summary_of(&project);
    assert_eq!(summary["rows"][0]["capped"], 1, "{summary}");
    let capped = summary["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .find(|f| f["step"] == "cap")
        .expect("a group of capped trials");
    assert_eq!(capped["trials"], serde_json::json!([3]));
    // A run whose agent spent more than the trial may is stopped before its next agent step.
    let project = Project::new();
    project.script(
        "twice",
        "Do it twice.\n",
        Some("def execute(request):\n    llm(\"one\", expects = {\"done\": \"yes\"})\n    llm(\"two\", expects = {\"done\": \"yes\"})\n"),
    );
    project.write(
        "cases.toml",
        "[[case]]\nname = \"x\"\nchecks = [\"true\"]\n",
    );
    project.write("agent.sh", AGENT);
    let run = eval_run(
        &project,
        &[
            "twice",
            "--cases",
            "cases.toml",
            "--trial-max-cost",
            "0.005",
        ],
    );
    run.expect_code(0);
    let summary = summary_of(&project);
    assert_eq!(summary["rows"][0]["capped"], 1, "{summary}");
}

#[test]
fn the_total_cost_cap_starts_no_more_trials_and_resume_runs_the_rest() {
    let project = project();
    let run = greet(&project, "5", &["--max-cost", "0.02"]);
    run.expect_code(1);
    assert!(
        run.stderr
            .contains("3 of 5 trials did not run (the trials spent $0.0200 (`--max-cost 0.02`))"),
        "{}",
        run.stderr
    );
    assert_eq!(calls(&project).len(), 2);
    // Resumed with a higher cap, the eval runs the rest, and only the rest.
    let id = summary_of(&project)["id"].as_str().expect("id").to_string();
    let resumed = crate::common::run_with_stdin(
        stand_in(&project, &["eval", "--resume", &id, "--max-cost", "1"]),
        "",
    );
    resumed.expect_code(0);
    assert_eq!(calls(&project).len(), 5);
    assert_eq!(summary_of(&project)["finished"], 5);
}

#[test]
fn a_killed_eval_resumes_without_running_a_finished_trial_again() {
    let project = project();
    let block = project.root().join("block");
    std::fs::write(&block, "").expect("block");
    let mut child = eval(
        &project,
        &["greet", "--cases", "cases.toml", "--trials", "5"],
    )
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("spawn");
    crate::common::wait_for(&project.root().join("block.started"));
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    std::fs::remove_file(&block).expect("unblock");
    let id = std::fs::read_dir(project.root().join(".mekara/evals"))
        .expect("evals")
        .flatten()
        .next()
        .expect("an eval")
        .file_name()
        .into_string()
        .expect("utf-8");
    // The trial the kill interrupted stops (its stdin closed): wait for its run's end.
    let resumed = crate::common::run_with_stdin(stand_in(&project, &["eval", "--resume", &id]), "");
    resumed.expect_code(0);
    assert!(
        resumed.stderr.contains("2 of 5 trials finished, 3 to run"),
        "{}",
        resumed.stderr
    );
    let trials: Vec<String> = calls(&project)
        .iter()
        .map(|l| l.split(' ').next().unwrap_or_default().to_string())
        .collect();
    // Trials 1 and 2 ran once; 3 twice (killed, then again); 4 and 5 once.
    assert_eq!(trials, ["1", "2", "3", "3", "4", "5"]);
    let summary = summary_of(&project);
    assert_eq!(summary["finished"], 5);
    // The interrupted attempt is a run of its own; its second attempt is another.
    let started = std::fs::read_to_string(
        project
            .root()
            .join(format!(".mekara/evals/{id}/trials/0003.started")),
    )
    .expect("started");
    assert_eq!(started.lines().count(), 2, "{started}");
}

#[test]
fn the_nl_baseline_and_a_git_ref_baseline_are_compared_with_the_script() {
    let project = project();
    let run = greet(&project, "10", &["--baseline", "nl", "--jobs", "4"]);
    run.expect_code(0);
    let summary = summary_of(&project);
    let rows: Vec<(String, u64, u64)> = summary["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["case"].is_null())
        .map(|r| {
            (
                r["variant"].as_str().unwrap_or_default().to_string(),
                r["passed"].as_u64().unwrap_or_default(),
                r["trials"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    // The baseline is given the NL script whole (the stand-in always does it).
    assert_eq!(
        rows,
        [
            ("script".to_string(), 7, 10),
            ("baseline: NL".to_string(), 10, 10)
        ]
    );
    assert!(calls(&project).iter().any(|c| c.ends_with("baseline")));

    // A git ref: the script as committed, compared with the one in the working tree.
    let project = self::project();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
            .args(args)
            .current_dir(project.root())
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    project.script(
        "greet",
        "Write a greeting.\n",
        Some("def execute(request):\n    auto(\"echo hello > hello.txt\", context = \"Greet\")\n"),
    );
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "v1"]);
    project.script(
        "greet",
        "Write a greeting for $ARGUMENTS into hello.txt.\n",
        Some(GREET),
    );
    let run = greet(&project, "10", &["--baseline", "HEAD", "--jobs", "4"]);
    run.expect_code(0);
    let rows = summary_of(&project)["rows"].clone();
    assert_eq!(rows[0]["passed"], 7);
    assert_eq!(rows[1]["variant"], "baseline: HEAD");
    assert_eq!(rows[1]["passed"], 10);
    let bad = eval_run(
        &project,
        &[
            "greet",
            "--cases",
            "cases.toml",
            "--baseline",
            "no-such-ref",
        ],
    );
    bad.expect_code(2);
    assert!(
        bad.stderr
            .contains("git cannot read the project's scripts at `no-such-ref`"),
        "{}",
        bad.stderr
    );
}

#[test]
fn a_judge_step_decides_a_trial_by_its_rubric() {
    let project = project();
    project.write(
        "cases.toml",
        "[[case]]\nname = \"judged\"\narguments = \"world\"\njudge = \"hello.txt greets someone\"\n",
    );
    // The stand-in judge says `pass`; the run's own check decides the others.
    let run = greet(&project, "2", &[]);
    run.expect_code(0);
    let summary = summary_of(&project);
    assert_eq!(summary["rows"][0]["passed"], 1, "{summary}");
    let judged = std::fs::read_dir(project.root().join(".mekara/runs"))
        .expect("runs")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("-judge"))
        .count();
    assert!(judged >= 1, "the judge's run is in the store");
}

#[test]
fn malformed_case_files_and_flags_are_refused_with_what_to_do() {
    let project = project();
    // A project's own script of a bundled script's name is refused without `--project-script`.
    project.script("flow/fix-ci", "Mine.\n", None);
    project.write("bad.toml", "[[case]]\nname = \"a\"\nchecks = \"true\"\n");
    project.write("unjudged.toml", "[[case]]\nname = \"a\"\n");
    let agent = "sh agent.sh";
    insta::assert_snapshot!(project.session(&[
        &[
            "eval",
            "greet",
            "--cases",
            "bad.toml",
            "--agent-command",
            agent
        ],
        &[
            "eval",
            "greet",
            "--cases",
            "unjudged.toml",
            "--agent-command",
            agent
        ],
        &[
            "eval",
            "greet",
            "--cases",
            "missing.toml",
            "--agent-command",
            agent
        ],
        &["eval", "greet", "--cases", "cases.toml"],
        &[
            "eval",
            "nope",
            "--cases",
            "cases.toml",
            "--agent-command",
            agent
        ],
        &[
            "eval",
            "greet",
            "--cases",
            "cases.toml",
            "--agent",
            "codex",
            "--model",
            "o3"
        ],
        &["eval", "--resume", "20990101-000000-abcd"],
        &[
            "eval",
            "flow/fix-ci",
            "--cases",
            "cases.toml",
            "--agent-command",
            agent
        ],
        &[
            "eval",
            "greet",
            "--cases",
            "cases.toml",
            "--agent-command",
            agent,
            "--max-cost",
            "NaN"
        ],
        &[
            "eval",
            "greet",
            "--cases",
            "cases.toml",
            "--agent-command",
            agent,
            "--baseline",
            "a b"
        ],
        &[
            "eval",
            "greet",
            "--cases",
            "cases.toml",
            "--agent-command",
            agent,
            "--trials",
            "0"
        ],
    ]));
    assert!(
        !Path::new(&project.root().join(".mekara/evals")).exists()
            || std::fs::read_dir(project.root().join(".mekara/evals"))
                .expect("dir")
                .count()
                == 0
    );
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs Chromium")]
fn chromium_draws_the_eval_page_with_its_table_and_a_link_to_each_trials_run() {
    use crate::ui::{Viewer, browse, curl, shots};
    let project = project();
    // A check whose text is markup: the page shows it as text.
    project.write(
        "cases.toml",
        &format!(
            "{CASES}\n[[case]]\nname = \"hostile\"\nchecks = [\"test -f '<b id=pwned>x</b>'\"]\n"
        ),
    );
    let run = greet(&project, "2", &["--baseline", "nl", "--jobs", "4"]);
    run.expect_code(0);
    let id = summary_of(&project)["id"].as_str().expect("id").to_string();
    let viewer = Viewer::start(&project);
    let (status, api) = curl(&[&viewer.with_token(&format!("/api/evals/{id}"))]);
    assert_eq!(status, 200, "{api}");
    let (status, _) = curl(&[&format!(
        "{}/evals/{id}",
        viewer.url.split("/?").next().expect("base")
    )]);
    assert_eq!(status, 403, "the eval page wants the token");
    let work = tempfile::tempdir().expect("tempdir");
    let (list, page, run_page) = (
        work.path().join("list.html"),
        work.path().join("eval.html"),
        work.path().join("run.html"),
    );
    let shot = shots().join("eval-page.png");
    let _ = std::fs::remove_file(&shot);
    browse(&serde_json::json!([
        {"open": viewer.with_token("/evals")},
        {"dom": list},
        {"open": viewer.with_token(&format!("/evals/{id}"))},
        {"dom": page},
        {"shot": shot, "width": 1280, "height": 900},
        {"wait": "document.getElementById('pwned') === null"},
        // Each trial links to its run: follow the first.
        {"eval": "document.querySelector('#trial-1 a.run').click()"},
        {"wait": "location.pathname.startsWith('/runs/')"},
        {"wait": "document.readyState === 'complete' && document.querySelector('h1') !== null"},
        {"dom": run_page},
    ]));
    let list = std::fs::read_to_string(list).expect("the evals page");
    assert!(list.contains(&format!(">{id}</a>")), "{list}");
    let dom = std::fs::read_to_string(page).expect("the eval page");
    for expected in [
        "8 of 8 trials finished",
        "<td>baseline: NL</td>",
        "<td class=\"rate\">100% (34–100%)</td>",
        "<code>check: test -f '&lt;b id=pwned&gt;x&lt;/b&gt;'</code>",
        &format!("href=\"/runs/{id}-t0001?token="),
    ] {
        assert!(
            dom.contains(expected),
            "`{expected}` is not in the DOM:\n{dom}"
        );
    }
    let run = std::fs::read_to_string(run_page).expect("the run page");
    assert!(run.contains("greet"), "{run}");
}

/// A stand-in for `flow/fix-ci`: fixes the bug of either bundled case when asked to fix a
/// check (`Step 3:`), and agrees with the rubric when asked to judge.
const FIXER: &str = r#"req=$(cat)
case "$req" in
  *Rubric:*) echo '{"outputs": {"verdict": "pass", "why": "the code is fixed, the test untouched"}}'; exit 0;;
esac
sed -i 's/max(xs) + min(xs)/max(xs) - min(xs)  /; s|sum(xs) \* len(xs)|sum(xs) / len(xs)  |' stats.py
echo '{"outputs": {"fix": "the arithmetic was wrong"}, "cost_usd": 0.05}'
"#;

#[test]
fn the_bundled_eval_cases_of_fix_ci_pass_with_an_agent_that_fixes_the_code() {
    let project = Project::new();
    project.write("fixer.sh", FIXER);
    let fixer = format!("sh {}", project.root().join("fixer.sh").display());
    let run = crate::common::run_with_stdin(
        project.command(&[
            "eval",
            "flow/fix-ci",
            "--agent-command",
            &fixer,
            "--jobs",
            "2",
            "--json",
        ]),
        "",
    );
    run.expect_code(0);
    let summary: Json = serde_json::from_str(&run.stdout).expect("JSON");
    let all = &summary["rows"][0];
    assert_eq!(
        (all["passed"].as_u64(), all["trials"].as_u64()),
        (Some(2), Some(2)),
        "{summary}\n{}",
        run.stderr
    );
    // An agent that changes nothing fails every case at the workflow's own limit.
    project.write("idle.sh", "cat >/dev/null; echo '{\"outputs\": {\"fix\": \"nothing\", \"verdict\": \"pass\", \"why\": \"-\"}}'\n");
    let idle = format!("sh {}", project.root().join("idle.sh").display());
    let run = crate::common::run_with_stdin(
        project.command(&[
            "eval",
            "flow/fix-ci",
            "--agent-command",
            &idle,
            "--jobs",
            "2",
            "--json",
        ]),
        "",
    );
    let summary: Json = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(summary["rows"][0]["passed"], 0, "{summary}");
    let no_cases = project.run(&["eval", "flow/review", "--agent-command", &idle], "");
    no_cases.expect_code(2);
    assert!(
        no_cases
            .stderr
            .contains("needs `--cases FILE`: mekara bundles no eval cases for `flow/review`"),
        "{}",
        no_cases.stderr
    );
}
