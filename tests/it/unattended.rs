//! Unattended runs with `--agent-command`: mekara starts a small scripted agent (a Python
//! script the test writes) for each llm step and NL script, with the JSON request of
//! `docs/agent-command.md` on its stdin. The agent logs every request it gets in
//! `calls.jsonl`, so the tests check what it was asked, and how many times.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use crate::common::{Project, Run};

const NL: &str = "---\ndescription: Ask a colour\n---\n1. Say hello.\n2. Name a colour.\n3. Echo it.\n4. Run `plain`.\n";

/// Two llm steps around shell steps, then an NL script called from it.
const STAR: &str = r#"
def execute(request):
    auto("echo hello", context = "Step 1: say hello")
    r = llm("Step 2: name a colour.", expects = {"colour": "a colour, one word"})
    auto("echo " + r.outputs["colour"], context = "Step 3: echo it")
    n = llm("Step 3b: count its letters.", expects = {"letters": "how many"})
    call_script("plain")
"#;

const PLAIN: &str = "---\ndescription: An NL script\n---\n1. Imagine a cube.\n";

/// The scripted agent: logs the request, then answers with `ANSWERS[(step kind, attempt)]`
/// from `answers.json` (keyed `"llm:1"`, `"llm:2"`, `"nl:1"`, `"fallback:1"`), else the
/// right outputs for the schema. An answer `{"hang": true}` sleeps, with a child in the
/// background whose pid goes to `hang.pid`; `{"raw": TEXT}` prints TEXT as it is;
/// `{"stderr": TEXT, "exit": N}` writes TEXT on stderr and exits with N.
const AGENT: &str = r##"
import json, os, sys, time
req = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps(req) + "\n")
try:
    answers = json.load(open(os.path.join(here, "answers.json")))
except FileNotFoundError:
    answers = {}
key = "%s:%d" % (req["kind"], req["attempt"])
steps = [json.loads(l)["step"] for l in open(os.path.join(here, "calls.jsonl"))]
answer = answers.get(req["step"] + "#" + str(steps.count(req["step"])), answers.get(key))
if answer is None:
    props = req["output_schema"]["properties"]
    answer = {"outputs": {k: ("red" if k == "colour" else 3) for k in props},
              "cost_usd": 0.25, "session": "sess-" + req["step"],
              "input_tokens": 100, "output_tokens": 7}
if isinstance(answer, dict) and answer.get("hang"):
    pid = os.spawnlp(os.P_NOWAIT, "sleep", "sleep", "300")
    open(os.path.join(here, "hang.pid"), "w").write(str(pid))
    open(os.path.join(here, "hanging"), "w").write("")
    time.sleep(300)
if isinstance(answer, dict) and "stderr" in answer:
    sys.stderr.write(answer["stderr"])
    sys.exit(answer["exit"])
if isinstance(answer, dict) and "raw" in answer:
    sys.stdout.write(answer["raw"])
else:
    print(json.dumps(answer))
"##;

/// The steps the agent is asked about when a run stopped during the second llm step is
/// resumed: that one again, not the first.
const STOPPED_AT_THE_SECOND_STEP: [&str; 4] = [
    "colour[1]",
    "colour[3]",
    "colour[3]",
    "colour[4] > plain[0]",
];

pub(crate) fn project() -> Project {
    let project = Project::new();
    project.script("colour", NL, Some(STAR));
    project.script("plain", PLAIN, None);
    project.write("agent/agent.py", AGENT);
    project
}

pub(crate) const AGENT_COMMAND: &str = "python3 agent/agent.py";

pub(crate) fn answers(project: &Project, answers: &Json) {
    project.write("agent/answers.json", &answers.to_string());
}

/// The steps the agent was asked about, in order.
pub(crate) fn asked_steps(project: &Project) -> Vec<String> {
    calls(project)
        .iter()
        .map(|c| c["step"].as_str().expect("a string").to_string())
        .collect()
}

/// The requests the agent got, in order.
pub(crate) fn calls(project: &Project) -> Vec<Json> {
    std::fs::read_to_string(project.root().join("agent/calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a logged request"))
        .collect()
}

fn run(project: &Project, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--agent-command", AGENT_COMMAND, "--json"];
    args.extend_from_slice(extra);
    project.run(&args, "")
}

pub(crate) fn json_summary(run: &Run) -> Json {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{}\n{}", run.stdout, run.stderr))
}

/// The steps of the one run's journal, as JSON.
fn journaled_steps(project: &Project) -> Vec<Json> {
    let ids = project.run_ids();
    project
        .journal(ids.last().expect("a run"))
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).expect("json line"))
        .filter(|e| e["event"] == "step")
        .collect()
}

#[test]
fn the_agent_answers_every_llm_step_and_the_nl_script_and_the_run_completes() {
    let project = project();
    let run = run(&project, &["colour"]);
    run.expect_code(0);
    let summary = json_summary(&run);
    assert_eq!(summary["state"], "completed");
    assert_eq!(summary["agent_steps"], 3, "{summary}");
    assert_eq!(summary["cost_usd"], 0.75);
    assert_eq!(summary["failed_step"], Json::Null);
    let calls = calls(&project);
    let kinds: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().expect("a string"),
                c["step"].as_str().expect("a string"),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("llm", "colour[1]"),
            ("llm", "colour[3]"),
            ("nl", "colour[4] > plain[0]")
        ]
    );
    // One session key for the whole run: the run id.
    let id = summary["run_id"].as_str().expect("a string");
    assert!(
        calls
            .iter()
            .all(|c| c["session_key"] == id && c["run_id"] == id)
    );
    // The agent's session of one answer is handed to the next.
    assert_eq!(calls[0]["agent_session"], Json::Null);
    assert_eq!(calls[1]["agent_session"], "sess-colour[1]");
    assert_eq!(
        calls[0]["output_schema"],
        json!({
            "type": "object",
            "properties": {"colour": {"description": "a colour, one word"}},
            "required": ["colour"],
            "additionalProperties": false
        })
    );
    // The prompt is the reply an agent over MCP would read: the steps executed, the NL
    // source once, the step.
    insta::assert_snapshot!(
        "first_prompt",
        project.scrub(calls[0]["prompt"].as_str().expect("a string"))
    );
    insta::assert_snapshot!(
        "second_prompt",
        project.scrub(calls[1]["prompt"].as_str().expect("a string"))
    );
    insta::assert_snapshot!(
        "nl_prompt",
        project.scrub(calls[2]["prompt"].as_str().expect("a string"))
    );
    // The answers are journaled with what the agent reported.
    let steps = journaled_steps(&project);
    let agent = &steps[1]["result"]["agent"];
    assert_eq!(agent["session"], "sess-colour[1]");
    assert_eq!(agent["cost_usd"], 0.25);
    assert_eq!(agent["input_tokens"], 100);
    assert_eq!(agent["output_tokens"], 7);
    assert!(agent["wall_ms"].is_u64(), "{agent}");
    assert_eq!(steps[2]["result"]["output"], "red\n");
}

#[test]
fn an_answer_of_the_wrong_shape_is_asked_again_with_the_error() {
    let mut seen = String::new();
    for wrong in [
        json!({"outputs": {"color": "red"}}),
        json!({"outputs": {}}),
        json!({"raw": "red, obviously"}),
        json!({"raw": ""}),
        json!({"outputs": ["red"]}),
        json!(["red"]),
    ] {
        let project = project();
        answers(&project, &json!({"colour[1]#1": wrong}));
        let run = run(&project, &["colour"]);
        run.expect_code(0);
        let calls = calls(&project);
        assert_eq!(
            calls.len(),
            4,
            "{wrong}: asked twice for the first step only"
        );
        assert_eq!(calls[1]["attempt"], 2);
        let error = calls[1]["previous_error"].as_str().unwrap_or_default();
        seen.push_str(&format!("{wrong}:\n{}\n\n", project.scrub(error)));
        let steps = journaled_steps(&project);
        assert_eq!(steps[1]["result"]["agent"]["attempts"], 2, "{wrong}");
    }
    insta::assert_snapshot!(seen);
}

#[test]
fn a_second_wrong_answer_fails_the_step_and_the_script_falls_back_to_the_agent() {
    let project = project();
    answers(
        &project,
        &json!({"llm:1": {"raw": "{not json"}, "llm:2": {"outputs": {"nope": 1}}}),
    );
    let run = run(&project, &["--fallback", "agent", "colour"]);
    run.expect_code(1);
    let summary = json_summary(&run);
    assert_eq!(summary["state"], "fell_back");
    assert_eq!(summary["failed_step"]["step"], "colour[1]");
    let error = summary["failed_step"]["error"].as_str().expect("a string");
    insta::assert_snapshot!(project.scrub(error));
    let kinds: Vec<String> = calls(&project)
        .iter()
        .map(|c| format!("{}:{}", c["kind"].as_str().expect("a string"), c["attempt"]))
        .collect();
    assert_eq!(kinds, ["llm:1", "llm:2", "fallback:1"]);
    let fallback = &calls(&project)[2];
    let prompt = fallback["prompt"].as_str().expect("a string");
    insta::assert_snapshot!(project.scrub(prompt));
}

#[test]
fn an_agent_that_says_it_cannot_fails_the_step_without_being_asked_again() {
    let project = project();
    answers(
        &project,
        &json!({"llm:1": {"error": "no colours here", "cost_usd": 0.5}}),
    );
    let run = run(&project, &["--fallback", "agent", "colour"]);
    run.expect_code(1);
    let summary = json_summary(&run);
    assert_eq!(summary["state"], "fell_back");
    assert_eq!(
        summary["failed_step"]["error"],
        "the agent said: no colours here"
    );
    assert_eq!(summary["cost_usd"], 0.75, "the failed answer's cost counts");
    assert_eq!(calls(&project).len(), 2, "the step, then the fallback");
}

#[test]
fn an_agent_that_cannot_finish_an_nl_script_stops_the_run_resumable() {
    let project = project();
    answers(&project, &json!({"nl:1": {"error": "no cubes"}}));
    let run = run(&project, &["colour"]);
    run.expect_code(1);
    let summary = json_summary(&run);
    assert_eq!(summary["state"], "failed");
    let id = summary["run_id"].as_str().expect("a string");
    assert_eq!(
        summary["resume"],
        format!("mekara run --resume {id} --agent-command '{AGENT_COMMAND}'")
    );
    answers(&project, &json!({}));
    let (_, steps) = resume_to_the_end(&project, id);
    assert_eq!(
        steps,
        [
            "colour[1]",
            "colour[3]",
            "colour[4] > plain[0]",
            "colour[4] > plain[0]"
        ]
    );
}

/// Regression: an agent that could not finish a failed script by hand stopped the run with
/// "the agent did not finish failed script, to finish by hand `colour`: …"; it says what
/// happened now, as for an NL script.
#[test]
fn an_agent_that_cannot_finish_a_script_says_so_in_a_sentence() {
    let mut stderr = String::new();
    for (answer, said) in [
        (
            json!({"llm:1": {"error": "no colours"}, "fallback:1": {"error": "no hands"}}),
            "a step of `colour` failed and the agent could not finish the script by hand: the agent said: no hands",
        ),
        (
            json!({"nl:1": {"error": "no cubes"}}),
            "the agent could not finish the NL script `colour[4] > plain[0]`: the agent said: no cubes",
        ),
    ] {
        let project = project();
        answers(&project, &answer);
        let run = run(&project, &["--fallback", "agent", "colour"]);
        run.expect_code(1);
        assert_eq!(json_summary(&run)["stopped_by"], said, "{}", run.stderr);
        stderr.push_str(&project.scrub(&run.stderr));
        stderr.push_str("--\n");
    }
    insta::assert_snapshot!(stderr);
}

/// Resumes run `id` with the agent, which completes it; what it printed, and every step the
/// agent was asked about in the run.
fn resume_to_the_end(project: &Project, id: &str) -> (Run, Vec<String>) {
    let resumed = run_resume(project, id, &[]);
    resumed.expect_code(0);
    assert_eq!(json_summary(&resumed)["state"], "completed");
    (resumed, asked_steps(project))
}

fn run_resume(project: &Project, id: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "run",
        "--resume",
        id,
        "--agent-command",
        AGENT_COMMAND,
        "--json",
    ];
    args.extend_from_slice(extra);
    project.run(&args, "")
}

#[test]
fn a_hanging_agent_is_killed_with_its_process_group_at_the_timeout() {
    let project = project();
    answers(&project, &json!({"llm:1": {"hang": true}}));
    let started = Instant::now();
    let run = run(&project, &["--agent-timeout", "2", "colour"]);
    assert!(started.elapsed() < Duration::from_secs(60));
    run.expect_code(1);
    let summary = json_summary(&run);
    assert_eq!(summary["failed_step"]["step"], "colour[1]");
    let error = summary["failed_step"]["error"].as_str().expect("a string");
    assert!(
        error.starts_with("the agent timed out after 2s; its process group was killed"),
        "{error}"
    );
    assert_eq!(
        calls(&project).len(),
        1,
        "not asked again after a timeout, and no fallback: the run stopped there"
    );
    let pid = hang_pid(&project);
    assert!(
        gone(pid),
        "the agent's background child {pid} is still running"
    );
}

/// Regression (issue 17): an agent CLI that failed with its error on stderr (as Gemini CLI
/// prints its JSON error) left only "the agent exited with code 41" in the journal.
#[test]
fn an_agent_that_fails_with_its_error_on_stderr_has_the_tail_of_it_in_the_steps_error() {
    let project = project();
    let said = r#"{"error": {"type": "FatalInputError", "code": 41}}"#;
    answers(&project, &json!({"llm:1": {"stderr": said, "exit": 41}}));
    let failed = run(&project, &["colour"]);
    failed.expect_code(1);
    let summary = json_summary(&failed);
    assert_eq!(
        summary["failed_step"]["error"],
        format!("the agent exited with code 41; on stderr it said: {said}")
    );
    assert!(
        failed.stderr.contains(said),
        "still shown live: {}",
        failed.stderr
    );
    let journaled = journaled_steps(&project);
    let error = journaled[1]["result"]["error"].as_str().unwrap_or_default();
    assert!(error.contains(said), "journaled: {:#}", journaled[1]);

    // A long stderr: only its last 4 KiB are kept, and the cut says so.
    let project = self::project();
    let long = format!("start{}the end", "x".repeat(10_000));
    answers(&project, &json!({"llm:1": {"stderr": long, "exit": 3}}));
    let long_failed = run(&project, &["colour"]);
    let error = json_summary(&long_failed)["failed_step"]["error"]
        .as_str()
        .expect("a string")
        .to_string();
    assert!(
        error.starts_with("the agent exited with code 3; on stderr it said: …"),
        "{error}"
    );
    assert!(error.ends_with("xxthe end"), "{error}");
    assert!(!error.contains("start"), "{error}");
    assert!(error.len() < 4200, "{} bytes", error.len());

    // Nothing on stderr: the error is as it was.
    let project = self::project();
    answers(&project, &json!({"llm:1": {"stderr": "", "exit": 5}}));
    let quiet = run(&project, &["colour"]);
    assert_eq!(
        json_summary(&quiet)["failed_step"]["error"],
        "the agent exited with code 5"
    );
}

/// Regression (issue 15): a script that is not found makes no run, yet the closing line
/// said "resume it with `mekara run --resume  --agent X`", with no run id. Regression: it then
/// said the MCP server's refusal ("Refused: … Nothing changed in the run.") with exit code 1;
/// it is now the terminal's own error, hint and exit code, before any run or agent.
#[test]
fn a_script_that_is_not_found_says_what_the_terminal_says_and_makes_no_run() {
    let project = project();
    for name in ["nosuch", "colur"] {
        let terminal = mekara_snapshot!(project, project.run(&["run", name], ""));
        for agent in [
            &["--agent", "claude"][..],
            &["--agent-command", AGENT_COMMAND],
            &["--json", "--agent-command", AGENT_COMMAND],
        ] {
            let mut args = vec!["run"];
            args.extend_from_slice(agent);
            args.push(name);
            let text = project.run(&args, "");
            assert_eq!(text.code, terminal.code, "{args:?}: {}", text.stderr);
            assert_eq!(text.stderr, terminal.stderr, "{args:?}");
            assert_eq!(text.stdout, "", "{args:?}");
        }
    }
    assert!(project.run_ids().is_empty());
    assert!(calls(&project).is_empty(), "the agent was started");
}

/// Spawns `mekara ARGS` and waits until the file `marker` (under the project) exists.
fn spawn_until(project: &Project, args: &[&str], marker: &str, never: &str) -> std::process::Child {
    let child = project
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mekara");
    let marker = project.root().join(marker);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "{never}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The pid of the background child a hanging agent started.
pub(crate) fn hang_pid(project: &Project) -> i32 {
    std::fs::read_to_string(project.root().join("agent/hang.pid"))
        .expect("the agent noted its child")
        .parse()
        .expect("a pid")
}

/// Whether process `pid` has ended (a zombie waiting for its parent counts as ended).
pub(crate) fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        let ended = state.is_none_or(|s| s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')));
        if ended || Instant::now() > deadline {
            return ended;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_run_resumes_without_asking_the_agent_again_for_answered_steps() {
    let project = project();
    // The second llm step hangs: mekara is killed while the agent works on it.
    answers(&project, &json!({"colour[3]#1": {"hang": true}}));
    let mut child = spawn_until(
        &project,
        &["run", "--agent-command", AGENT_COMMAND, "colour"],
        "agent/hanging",
        "the agent never reached the second step",
    );
    child.kill().expect("SIGKILL mekara");
    child.wait().expect("reap mekara");
    // The agent mekara was waiting for dies with it (issue 40; before, it worked on until a
    // resume killed its group).
    let pid = hang_pid(&project);
    assert!(gone(pid), "the agent's child {pid} outlived mekara");
    let id = project.run_ids().pop().expect("a run");
    let (resumed, steps) = resume_to_the_end(&project, &id);
    assert_eq!(
        steps, STOPPED_AT_THE_SECOND_STEP,
        "the answered step was not asked again; the one killed was"
    );
    insta::assert_snapshot!(project.scrub(&resumed.stderr));
}

#[test]
fn max_agent_steps_stops_before_the_next_agent_step_and_the_run_resumes() {
    let project = project();
    let run = run(&project, &["--max-agent-steps", "1", "colour"]);
    run.expect_code(1);
    let summary = json_summary(&run);
    assert_eq!(summary["state"], "stopped");
    assert_eq!(
        summary["stopped_by"],
        "stopped before `colour[3]`: the run has had 1 agent answer (`--max-agent-steps 1`)"
    );
    assert_eq!(summary["steps"], 3);
    assert_eq!(calls(&project).len(), 1);
    let id = summary["run_id"].as_str().expect("a string");
    // The limit counts the run's answers, so the same limit stops it again at once...
    let again = run_resume(&project, id, &["--max-agent-steps", "1"]);
    again.expect_code(1);
    assert_eq!(calls(&project).len(), 1);
    // ...and a higher one lets it go on.
    let resumed = run_resume(&project, id, &["--max-agent-steps", "3"]);
    resumed.expect_code(0);
    assert_eq!(json_summary(&resumed)["agent_steps"], 3);
    assert_eq!(calls(&project).len(), 3);
}

#[test]
fn max_cost_and_max_duration_stop_the_run_naming_the_limit() {
    let project = project();
    let run = run(
        &project,
        &["--max-cost", "0.5", "--on-cap", "stop", "colour"],
    );
    run.expect_code(1);
    let summary = json_summary(&run);
    assert_eq!(
        summary["stopped_by"],
        "stopped before `colour[4] > plain[0]`: the run's agents spent $0.5000 (`--max-cost 0.5`)"
    );
    let budgets: Vec<Json> = calls(&project)
        .iter()
        .map(|c| c["budget_usd"].clone())
        .collect();
    assert_eq!(
        budgets,
        [json!(0.5), json!(0.25)],
        "what is left goes to the agent"
    );

    let project = self::project();
    let run = self::run(&project, &["--max-duration", "1ms", "colour"]);
    run.expect_code(1);
    let summary = json_summary(&run);
    let stopped = summary["stopped_by"].as_str().expect("a string");
    assert!(
        stopped.starts_with("stopped before `colour[1]`: this run took")
            && stopped.ends_with("(`--max-duration 1ms`)"),
        "{stopped}"
    );
    assert!(calls(&project).is_empty());
}

#[test]
fn the_junit_report_and_runs_show_tell_each_step_and_its_agent_cost() {
    let project = project();
    answers(&project, &json!({"llm:1": {"outputs": {"nope": 1}}}));
    let junit = project.root().join("report.xml");
    let run = project.run(
        &[
            "run",
            "--agent-command",
            AGENT_COMMAND,
            "--junit",
            junit.to_str().expect("a UTF-8 path"),
            "colour",
        ],
        "",
    );
    run.expect_code(0);
    let report = std::fs::read_to_string(&junit).expect("the JUnit report");
    let report = regex_times(&project.scrub(&report));
    insta::assert_snapshot!("junit", report);
    let id = project.run_ids().pop().expect("a run");
    mekara_snapshot!(
        "runs_show",
        project,
        project.command(&["runs", "show", &id])
    );
    mekara_snapshot!("closing_line", project, run);
}

/// `time="0.123"` written as `time="[S]"`.
fn regex_times(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("time=\"") {
        out.push_str(&rest[..at + 6]);
        rest = &rest[at + 6..];
        let end = rest.find('"').unwrap_or(0);
        out.push_str("[S]");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn unattended_flags_without_an_agent_and_bad_limits_are_usage_errors() {
    let project = project();
    for args in [
        &["run", "--json", "colour"][..],
        &["run", "--max-agent-steps", "2", "colour"],
        &["run", "--agent", "claude", "--agent-command", "x", "colour"],
        &[
            "run",
            "--agent-command",
            "x",
            "--agent-timeout",
            "0",
            "colour",
        ],
        &["run", "--agent-command", "x", "--max-cost", "-1", "colour"],
        &[
            "run",
            "--agent-command",
            "x",
            "--max-duration",
            "soon",
            "colour",
        ],
    ] {
        let run = project.run(args, "");
        run.expect_code(2);
        assert!(!run.stderr.contains("panicked"), "{args:?}: {}", run.stderr);
    }
    assert!(!Path::new(&project.root().join("agent/calls.jsonl")).exists());
}

#[test]
fn dry_run_lists_the_step_calls_and_those_for_the_agent_and_runs_nothing() {
    let project = project();
    mekara_snapshot!(
        "dry_run_compiled",
        project,
        project.command(&[
            "run",
            "--dry-run",
            "--agent-command",
            AGENT_COMMAND,
            "colour"
        ])
    );
    mekara_snapshot!(
        "dry_run_nl",
        project,
        project.command(&["run", "--dry-run", "plain"])
    );
    assert!(project.run_ids().is_empty(), "a dry run made a run");
    assert!(calls(&project).is_empty(), "a dry run started the agent");
}

/// Regression (issue 15): `--dry-run` did not list `parallel(...)` calls, so the members'
/// steps looked like steps that run one after another.
#[test]
fn dry_run_lists_parallel_groups_with_the_steps_of_their_members() {
    let project = project();
    project.script(
        "checks",
        "---\ndescription: Checks at once\n---\n1. Lint and test at once.\n",
        Some(
            r#"
def execute(request):
    auto("echo start", context = "begin")
    parallel([lambda: auto("make lint", context = "lint"), lambda: auto("make test")], max = 4)
    each = [lambda: auto("echo " + n) for n in ["a", "b"]]
    parallel(each)
    parallel([lambda: lint()])
    llm("Summarise.")

def lint():
    auto("cargo clippy")
"#,
        ),
    );
    mekara_snapshot!(
        "dry_run_parallel",
        project,
        project.command(&["run", "--dry-run", "checks"])
    );
    assert!(project.run_ids().is_empty(), "a dry run made a run");
}

/// Found by a model playing the agent (issue 28): `--dry-run` showed a shell command held
/// in a constant as a function call (`CMD(…)`). A constant of the module, and `+`,
/// `.format` and `%` of constants, show as the command; a function called as a step is
/// still shown as a call, and a variable (or a name assigned twice) as computed.
#[test]
fn dry_run_shows_a_command_held_in_a_constant_as_the_command_and_a_computed_one_as_a_template() {
    let project = project();
    project.script(
        "release",
        "---\ndescription: Test and tag\n---\n1. Test.\n2. Tag.\n",
        Some(
            r#"
CMD = "cargo test"
FLAGS = "--locked"
FULL = CMD + " " + FLAGS
TAG = "git tag v{}-{}".format("1", FLAGS)
PUSH = "git push %s %s" % ("origin", "main")
CHANGED = "a"
CHANGED = "b"
CONTEXT = "Run the tests"

def execute(request):
    auto(CMD, context = CONTEXT)
    auto(FULL)
    auto(CMD + " --release")
    auto(TAG)
    auto(PUSH)
    auto(CHANGED)
    auto(notes, {})
    local = "echo " + request
    auto(local)
    auto(notes)
    r = llm("Which version?", expects = {"version": "x.y.z"})
    version = r.outputs["version"]
    auto(f"git tag v{version} -m {{release}}")
    auto("git push origin v%s" % version)
    auto(request)

def notes():
    print("notes")
"#,
        ),
    );
    let run = mekara_snapshot!(project, project.run(&["run", "--dry-run", "release"], ""));
    let lines: Vec<&str> = run.stdout.lines().collect();
    for expected in [
        "auto         $ cargo test  # Run the tests",
        "auto         $ cargo test --locked",
        "auto         $ cargo test --release",
        "auto         $ git tag v1---locked",
        "auto         $ git push origin main",
        "auto         (computed when it runs)",
        "auto         notes(…)",
        "auto         $ echo {request}  ({…} when it runs)",
        "auto         $ git tag v{version} -m {release}  ({…} when it runs)",
        "auto         $ git push origin v{version}  ({…} when it runs)",
    ] {
        assert!(
            lines.iter().any(|l| l.ends_with(expected)),
            "no line ends with `{expected}`:\n{}",
            run.stdout
        );
    }
    // A parameter alone says nothing: no template.
    let last = lines
        .iter()
        .rev()
        .find(|l| l.contains(" auto "))
        .expect("a step");
    assert!(
        last.ends_with("auto         (computed when it runs)"),
        "{last}"
    );
    assert!(project.run_ids().is_empty(), "a dry run made a run");
}

#[test]
fn ctrl_c_during_an_agent_step_stops_the_agent_and_leaves_the_run_resumable() {
    let project = project();
    answers(&project, &json!({"colour[3]#1": {"hang": true}}));
    let child = spawn_until(
        &project,
        &["run", "--agent-command", AGENT_COMMAND, "--json", "colour"],
        "agent/hanging",
        "the agent never reached the second step",
    );
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(interrupted.success());
    let run = Run::from_output(child.wait_with_output().expect("wait for mekara"));
    run.expect_code(130);
    let summary = json_summary(&run);
    assert_eq!(summary["state"], "interrupted");
    let pid = hang_pid(&project);
    assert!(
        gone(pid),
        "the agent's background child {pid} is still running"
    );
    let id = summary["run_id"].as_str().expect("a string");
    let (_, steps) = resume_to_the_end(&project, id);
    assert_eq!(steps, STOPPED_AT_THE_SECOND_STEP);
}

/// Regression: Ctrl-C was handled only once the first agent step was reached; during the
/// auto steps before it, it killed mekara without a summary.
#[test]
fn ctrl_c_during_an_auto_step_before_the_first_agent_step_ends_with_a_summary() {
    let project = project();
    project.script(
        "slow",
        "---\ndescription: Slow\n---\n1. Wait.\n",
        Some("def execute(request):\n    auto(\"touch started && sleep 30\")\n    llm(\"Say hi.\")\n"),
    );
    let child = spawn_until(
        &project,
        &["run", "--agent-command", AGENT_COMMAND, "--json", "slow"],
        "started",
        "the step never started",
    );
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    let run = Run::from_output(child.wait_with_output().expect("wait for mekara"));
    run.expect_code(130);
    assert_eq!(json_summary(&run)["state"], "interrupted");
    assert!(calls(&project).is_empty());
}

/// `--retry` works unattended too: a step the agent could not answer, after the run fell
/// back and the agent finished the fallback, is asked again and the run goes on to its end.
#[test]
fn retry_asks_the_agent_again_for_the_failed_step_and_the_run_completes() {
    let project = project();
    answers(&project, &json!({"llm:1": {"error": "no colours today"}}));
    let failed = run(&project, &["--fallback", "agent", "colour"]);
    failed.expect_code(1);
    let summary = json_summary(&failed);
    assert_eq!(summary["state"], "fell_back");
    let id = summary["run_id"].as_str().expect("a string").to_string();

    answers(&project, &json!({}));
    let retried = run_resume(&project, &id, &["--retry"]);
    retried.expect_code(0);
    assert_eq!(
        json_summary(&retried)["state"],
        "completed",
        "{}",
        retried.stderr
    );
    assert_eq!(
        asked_steps(&project),
        [
            "colour[1]",
            "colour",
            "colour[1]",
            "colour[3]",
            "colour[4] > plain[0]"
        ],
        "the failed step, its fallback, then the step again and the rest"
    );
    let kinds: Vec<String> = calls(&project)
        .iter()
        .map(|c| c["kind"].as_str().expect("a string").to_string())
        .collect();
    assert_eq!(kinds, ["llm", "fallback", "llm", "llm", "nl"]);
}

/// A script whose tests fail must not be released: unattended, a failed step stops the run
/// there (nobody is watching to say whether the script's own failure handling allows working
/// around it), resumable, with the exact command that runs the step again once the cause is
/// fixed. Resumed without `--retry`, it stops at the same failure; the agent is never asked.
#[test]
fn a_failed_step_stops_an_unattended_run_and_retry_goes_on_after_the_fix() {
    let project = project();
    project.script(
        "release",
        "1. Run the tests; if they fail, stop: do not release.\n2. Tell the user it is released.\n",
        Some(
            "def execute(request):\n    \
             auto(\"test -f tests-pass\", context = \"Step 1: run the tests\")\n    \
             llm(\"Step 2: tell the user it is released.\")\n",
        ),
    );
    let failed = run(&project, &["release"]);
    failed.expect_code(1);
    let summary = json_summary(&failed);
    assert_eq!(summary["state"], "failed", "{summary}");
    assert_eq!(summary["failed_step"]["step"], "release[0]");
    let id = summary["run_id"].as_str().expect("a string").to_string();
    let resume = format!("mekara run --resume {id} --agent-command '{AGENT_COMMAND}' --retry");
    assert_eq!(summary["resume"], resume.as_str());
    insta::assert_snapshot!(project.scrub(&failed.stderr));
    assert!(
        calls(&project).is_empty(),
        "the agent was asked: {:?}",
        calls(&project)
    );

    // Resumed as it is: the same failure, the same stop.
    let again = run_resume(&project, &id, &[]);
    again.expect_code(1);
    assert_eq!(json_summary(&again)["state"], "failed");
    assert!(calls(&project).is_empty());

    // The cause fixed, `--retry` runs the step again and the run goes on to its end.
    project.write("tests-pass", "");
    let retried = run_resume(&project, &id, &["--retry"]);
    retried.expect_code(0);
    assert_eq!(
        json_summary(&retried)["state"],
        "completed",
        "{}",
        retried.stderr
    );
    assert_eq!(asked_steps(&project), ["release[1]"]);
}

/// The same failure with `--fallback agent`: the agent finishes the script by hand.
#[test]
fn with_fallback_agent_a_failed_step_goes_to_the_agent() {
    let project = project();
    answers(&project, &json!({"llm:1": {"error": "no colours here"}}));
    let stopped = run(&project, &["colour"]);
    stopped.expect_code(1);
    assert_eq!(json_summary(&stopped)["state"], "failed");
    assert_eq!(asked_steps(&project), ["colour[1]"], "no fallback asked");
    let project = self::project();
    answers(&project, &json!({"llm:1": {"error": "no colours here"}}));
    let fell_back = run(&project, &["--fallback", "agent", "colour"]);
    fell_back.expect_code(1);
    assert_eq!(json_summary(&fell_back)["state"], "fell_back");
    assert_eq!(asked_steps(&project), ["colour[1]", "colour"]);
}

/// Regression (issue 28): a run that needed no agent in an invocation ended within its first
/// call, and the summary said "run not started: 0 steps" with `run_id: null` although it had
/// completed, fresh and on resume after `mekara answer`.
#[test]
fn a_run_that_needs_no_agent_is_reported_with_its_id_and_steps() {
    let project = project();
    project.script(
        "plain-steps",
        "1. Say hi.\n",
        Some("def execute(request):\n    auto(\"echo hi\")\n"),
    );
    let done = run(&project, &["plain-steps"]);
    done.expect_code(0);
    let summary = json_summary(&done);
    assert_eq!(summary["state"], "completed");
    assert_eq!(summary["steps"], 1, "{summary}");
    assert_eq!(summary["run_id"], project.run_ids()[0].as_str());
    let text = project.run(
        &["run", "--agent-command", AGENT_COMMAND, "plain-steps"],
        "",
    );
    insta::assert_snapshot!(project.scrub(&text.stdout));

    project.script(
        "gated",
        "1. Ask the user to go on.\n2. Say hi.\n",
        Some("def execute(request):\n    ask(\"Go on?\", choices = [\"yes\", \"no\"])\n    auto(\"echo hi\")\n"),
    );
    let waiting = run(&project, &["gated"]);
    waiting.expect_code(1);
    let id = json_summary(&waiting)["run_id"]
        .as_str()
        .expect("the waiting run's id")
        .to_string();
    project.run(&["answer", &id, "yes"], "").expect_code(0);
    let resumed = run_resume(&project, &id, &[]);
    resumed.expect_code(0);
    let summary = json_summary(&resumed);
    assert_eq!(summary["state"], "completed");
    assert_eq!(summary["run_id"], id.as_str());
    assert_eq!(summary["steps"], 2, "{summary}");
    assert!(calls(&project).is_empty());
}

/// Regression (issue 28): a script's own `print` showed in a terminal run and nowhere in an
/// unattended one; it goes to stderr with the progress, once (not again on resume).
#[test]
fn a_scripts_print_shows_in_an_unattended_run() {
    let project = project();
    project.script(
        "printing",
        "1. Say which.\n2. Name a colour.\n",
        Some(
            "def execute(request):\n    \
             print(\"releasing \" + request)\n    \
             llm(\"Name a colour.\", expects = [\"colour\"])\n",
        ),
    );
    let done = run(&project, &["printing", "v2"]);
    done.expect_code(0);
    assert_eq!(
        done.stderr.matches("releasing v2\n").count(),
        1,
        "{}",
        done.stderr
    );
}

/// Found by a model playing the agent (issue 28): a script that reads its tests' failure and
/// stops itself (`allow_failure = True`, then `fail`) was retried from after the tests, so the
/// old failure was answered from the journal and the run stopped again. The step it stopped on
/// runs again.
#[test]
fn retry_runs_again_the_allowed_failure_a_script_stopped_on() {
    let project = project();
    project.script(
        "release",
        "1. Run the tests; if they fail, stop.\n2. Release.\n",
        Some(
            "def execute(request):\n    \
             t = auto(\"test -f tests-pass\", allow_failure = True)\n    \
             if not t.success:\n        \
             fail(\"the tests failed: not released\")\n    \
             auto(\"echo released\")\n",
        ),
    );
    let failed = run(&project, &["release"]);
    failed.expect_code(1);
    let summary = json_summary(&failed);
    let id = summary["run_id"].as_str().expect("a string").to_string();
    // The script stopped itself, on a failure it allowed: said so, with how to retry.
    assert_eq!(summary["state"], "stopped_by_script", "{summary}");
    insta::assert_snapshot!(project.scrub(&failed.stderr));
    project.write("tests-pass", "");
    let retried = run_resume(&project, &id, &["--retry"]);
    retried.expect_code(0);
    assert_eq!(
        json_summary(&retried)["state"],
        "completed",
        "{}",
        retried.stderr
    );
    insta::assert_snapshot!(project.scrub(&retried.stderr));
}

/// Regression: the `--junit` writer let control characters through, which made the report
/// invalid XML. A step's command and a failure's message holding control characters,
/// characters XML cannot hold (U+FFFE, U+FFFF), `]]>`, quotes, markup and line breaks give
/// a report Python's XML parser reads, with every other character as it was.
#[test]
fn the_junit_report_is_valid_xml_whatever_the_steps_say() {
    let project = Project::new();
    project.script(
        "odd",
        "---\ndescription: Odd text\n---\n1. Fail oddly.\n",
        Some(
            r#"
def execute(request):
    auto("printf 'x' # bell" + chr(7) + " esc" + chr(27) + " ]]> " + chr(0xfffe), context = "odd command")
    auto(bad, {})

def bad():
    fail("odd " + chr(1) + chr(0) + " ]]> & <x> \"q\" 'a' " + chr(0xffff) + "\r\n\ttab é")
"#,
        ),
    );
    let junit = project.root().join("report.xml");
    let run = project.run(
        &[
            "run",
            "--agent-command",
            "false",
            "--junit",
            junit.to_str().expect("a UTF-8 path"),
            "odd",
        ],
        "",
    );
    run.expect_code(1);
    let parsed = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys, xml.etree.ElementTree as ET\n\
             root = ET.parse(sys.argv[1]).getroot()\n\
             print(json.dumps([[c.get('name'), [f.get('message') for f in c]] for c in root.iter('testcase')]))",
        ])
        .arg(&junit)
        .output()
        .expect("python3 runs");
    assert!(
        parsed.status.success(),
        "the report is not valid XML: {}\n{}",
        String::from_utf8_lossy(&parsed.stderr),
        std::fs::read_to_string(&junit).unwrap_or_default()
    );
    let cases: Json = serde_json::from_slice(&parsed.stdout).expect("the cases as JSON");
    let text = cases.to_string();
    assert!(
        text.contains(r"bell\\u{7} esc\\u{1b} ]]> \\u{fffe}"),
        "the command, its odd characters shown: {text}"
    );
    assert!(
        text.contains(r#"odd \\u{1}\\u{0} ]]> & <x> \"q\" 'a' \\u{ffff}"#)
            && text.contains(r"\n\ttab é"),
        "the failure's message, line breaks and tabs kept: {text}"
    );
}

/// Regression (issue 31): an `--agent-command` that printed 1.5 GB was read whole into
/// mekara, and a 12 MB answer was journaled. An answer past the cap every value has is
/// stopped there (even one that never ends) and refused with the cap's message; nothing
/// of it is journaled.
#[test]
fn an_agent_answer_past_the_cap_is_stopped_and_refused() {
    for agent in [
        "python3 -c 'import json, sys; sys.stdin.read(); print(json.dumps({\"outputs\": {\"colour\": \"r\" * 50000000}}))'",
        "yes '{\"outputs\": {}}'",
    ] {
        let project = project();
        let run = project.run(
            &[
                "run",
                "--agent-command",
                agent,
                "--agent-timeout",
                "600",
                "colour",
            ],
            "",
        );
        run.expect_code(1);
        // Regression (issue 40): a 50 MB answer was said to be "16777216 bytes", what it
        // had written when it was stopped. Its size is said only when whole (50000028 bytes
        // with print's newline); stopped midway, the limit it passed.
        assert!(
            run.stderr.contains("the agent's answer is 50000028 bytes of JSON, more than the 8388608 bytes a step keeps")
                || run.stderr.contains("the agent's answer passed the 8388608 bytes a step keeps, so the agent was stopped before it finished writing it; have it give a smaller answer"),
            "{agent}: {}",
            &run.stderr[run.stderr.len().saturating_sub(3000)..]
        );
        let id = project.run_ids().pop().expect("a run");
        let journal = project.journal(&id);
        assert!(journal.len() < 100_000, "{agent}: {} bytes", journal.len());
    }
}

/// `mekara run --agent-command … ARGS` with the backoff scaled down a thousandfold
/// (`MEKARA_BACKOFF_SCALE`), so that an 8 s wait takes 8 ms.
fn run_scaled(project: &Project, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--agent-command", AGENT_COMMAND, "--json"];
    args.extend_from_slice(extra);
    let mut command = project.command(&args);
    command.env("MEKARA_BACKOFF_SCALE", "0.001");
    crate::common::run_with_stdin(command, "")
}

/// The `wait` events of the one run's journal.
fn journaled_waits(project: &Project) -> Vec<Json> {
    let ids = project.run_ids();
    project
        .journal(ids.last().expect("a run"))
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).expect("json line"))
        .filter(|e| e["event"] == "wait")
        .collect()
}

#[test]
fn an_agent_command_that_reports_a_rate_limit_is_waited_out_and_asked_the_same_step_again() {
    let project = project();
    answers(
        &project,
        &json!({
            "colour[1]#1": {"error": "429 Too Many Requests", "rate_limited": true, "retry_after": 30},
            "colour[1]#2": {"error": "the model is overloaded", "rate_limited": true},
        }),
    );
    let run = run_scaled(&project, &["colour"]);
    let summary = json_summary(&run);
    assert_eq!(summary["state"], "completed", "{summary}\n{}", run.stderr);
    run.expect_code(0);
    assert_eq!(
        asked_steps(&project),
        [
            "colour[1]",
            "colour[1]",
            "colour[1]",
            "colour[3]",
            "colour[4] > plain[0]"
        ]
    );
    // Asked again as the same step: the first attempt, not a second one for a wrong answer.
    let calls = calls(&project);
    assert!(
        calls[..3]
            .iter()
            .all(|c| c["attempt"] == 1 && c["previous_error"].is_null())
    );
    // The retry-after of 30 s (30 ms, scaled) is honoured; the second wait is the backoff's.
    assert!(
        run.stderr
            .contains("`colour[1]`: rate-limited by the model; waiting 30 ms (attempt 2)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("(attempt 3)"), "{}", run.stderr);
    let waits = journaled_waits(&project);
    assert_eq!(waits.len(), 2, "{waits:#?}");
    assert_eq!(
        (
            &waits[0]["step"],
            &waits[0]["reason"],
            &waits[0]["attempt"],
            &waits[0]["wait_ms"]
        ),
        (
            &json!("colour[1]"),
            &json!("rate-limit"),
            &json!(2),
            &json!(30)
        )
    );
    assert_eq!(waits[0]["said"], "the agent said: 429 Too Many Requests");
    assert_eq!(waits[0]["ignorable"], true);
    assert_eq!(waits[1]["attempt"], 3);
    // The step ran once: one journaled answer, after both waits.
    let steps = journaled_steps(&project);
    assert_eq!(steps.iter().filter(|s| s["index"] == 1).count(), 1);
    let id = summary["run_id"].as_str().expect("the run id");
    let shown = project.run(&["runs", "show", id], "");
    assert!(
        shown
            .stdout
            .contains("  ⏸ `colour[1]` rate-limited by the model, "),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains(
            ": a wait of 30 ms before attempt 2; it said: the agent said: 429 Too Many Requests"
        ),
        "{}",
        shown.stdout
    );
}

#[test]
fn a_rate_limit_that_does_not_end_fails_the_step_saying_how_long_it_waited() {
    let project = project();
    let limited = json!({"error": "429 Too Many Requests", "rate_limited": true});
    let answers_json: serde_json::Map<String, Json> = (1..=9)
        .map(|n| (format!("colour[1]#{n}"), limited.clone()))
        .collect();
    answers(&project, &Json::Object(answers_json));
    let run = run_scaled(&project, &["colour"]);
    run.expect_code(1);
    let summary = json_summary(&run);
    assert_eq!(summary["state"], "failed", "{summary}");
    let error = summary["failed_step"]["error"]
        .as_str()
        .expect("the step's error");
    assert!(
        error.starts_with("rate-limited by the model 9 times; waited ")
            && error.ends_with(" in all, then gave up; the last time it said: the agent said: 429 Too Many Requests"),
        "{error}"
    );
    assert_eq!(
        asked_steps(&project).len(),
        9,
        "asked once, then again after each of 8 waits"
    );
    assert_eq!(journaled_waits(&project).len(), 8);
    // Stopped resumable, as any failed step: `--retry` asks again.
    assert!(
        summary["resume"]
            .as_str()
            .is_some_and(|r| r.ends_with(" --retry")),
        "{summary}"
    );
}

#[test]
fn a_rate_limit_whose_wait_would_pass_max_duration_fails_the_step_at_once() {
    let project = project();
    answers(
        &project,
        &json!({"colour[1]#1": {"error": "slow down", "rate_limited": true, "retry_after": 600}}),
    );
    let run = project.run(
        &[
            "run",
            "--agent-command",
            AGENT_COMMAND,
            "--json",
            "--max-duration",
            "5m",
            "colour",
        ],
        "",
    );
    run.expect_code(1);
    let summary = json_summary(&run);
    let error = summary["failed_step"]["error"]
        .as_str()
        .expect("the step's error");
    assert_eq!(
        error,
        "rate-limited by the model, and the wait (10 min) would pass `--max-duration`; it said: the agent said: slow down"
    );
    assert!(journaled_waits(&project).is_empty());
    assert_eq!(asked_steps(&project), ["colour[1]"]);
}

#[test]
fn a_run_killed_during_a_wait_resumes_and_asks_the_step_once_more() {
    let project = project();
    // A wait of ten minutes, unscaled: mekara is killed during it.
    answers(
        &project,
        &json!({"colour[1]#1": {"error": "429", "rate_limited": true, "retry_after": 600}}),
    );
    let mut child = project
        .command(&["run", "--agent-command", AGENT_COMMAND, "colour"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mekara");
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let waiting = project
            .run_ids()
            .pop()
            .filter(|id| project.journal(id).contains(r#""event":"wait""#));
        if let Some(id) = waiting {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "the run never journaled its wait"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().expect("SIGKILL mekara");
    child.wait().expect("reap mekara");
    let shown = project.run(&["runs", "show", &id], "");
    assert!(
        shown.stdout.contains("a wait of 10 min before attempt 2"),
        "{}",
        shown.stdout
    );
    // Regression (issue 40): the resume asked the agent at once, in the wait the model had
    // asked for. It waits out the rest (scaled a thousandfold here: about 600 ms).
    let resumed = run_scaled(&project, &["--resume", &id]);
    resumed.expect_code(0);
    assert!(
        resumed.stderr.contains("`colour[1]`: the run stopped during a wait for a rate limit of the model; waiting out the rest (")
            && resumed.stderr.contains(") before asking the agent again"),
        "{}",
        resumed.stderr
    );
    let steps = asked_steps(&project);
    assert!(
        resumed.stdout.contains("completed"),
        "{}\n{}",
        resumed.stdout,
        resumed.stderr
    );
    assert_eq!(
        steps,
        [
            "colour[1]",
            "colour[1]",
            "colour[3]",
            "colour[4] > plain[0]"
        ],
        "the step that waited is asked again, once"
    );
    let steps = journaled_steps(&project);
    assert_eq!(steps.iter().filter(|s| s["index"] == 1).count(), 1);
    assert_eq!(
        steps.iter().filter(|s| s["index"] == 0).count(),
        1,
        "the shell step before it did not run again"
    );
    assert_eq!(journaled_waits(&project).len(), 1);
}

/// A project whose one llm step is being answered by `agent` (which notes its shell's pid in
/// `agent.pid` first), and the unattended `mekara run` waiting for it.
fn waiting_for_the_agent(agent: &str) -> (Project, std::process::Child) {
    let project = Project::new();
    project.script(
        "word",
        "Say a word.",
        Some("def execute(request):\n    llm(\"Say a word.\", expects = [\"word\"])\n"),
    );
    let agent = format!("echo $$ > agent.tmp && mv agent.tmp agent.pid; {agent}");
    let mekara = project.spawn(&["run", "--agent-command", &agent, "word"]);
    crate::common::wait_for(&project.root().join("agent.pid"));
    (project, mekara)
}

/// Regression (issue 40): an unattended run's agent went on after its mekara was killed
/// (SIGKILL, as the OOM killer does), working, and spending, for nobody. Its process group
/// dies with mekara now.
#[test]
fn an_agent_does_not_outlive_a_killed_mekara() {
    // The stand-in says only later what it did.
    let (project, mut mekara) = waiting_for_the_agent(
        "sleep 1; touch late.marker; echo '{\"outputs\": {\"word\": \"w\"}}'",
    );
    let root = project.root();
    mekara.kill().expect("SIGKILL mekara");
    mekara.wait().expect("reap");
    let pid = crate::durability::pid_in(&root.join("agent.pid"));
    assert!(
        crate::durability::wait_until_dead(&pid),
        "the agent {pid} outlived mekara"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !root.join("late.marker").exists(),
        "the agent went on after mekara was killed"
    );
}

/// Regression (issue 40): SIGTERM of an unattended run (a CI job cancelled) ended mekara and
/// left its agent working, with no word on how to resume. It stops the agent and leaves the
/// run resumable, as Ctrl-C does.
#[test]
fn sigterm_stops_the_agent_and_leaves_the_run_resumable() {
    let (project, mekara) = waiting_for_the_agent("sleep 30");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &mekara.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let out = Run::from_output(mekara.wait_with_output().expect("wait"));
    out.expect_code(130);
    let id = project.run_ids().remove(0);
    assert!(
        out.stderr.contains(&format!(
            "resume it with `mekara run --resume {id} --agent-command"
        )),
        "{}",
        out.stderr
    );
    let pid = crate::durability::pid_in(&project.root().join("agent.pid"));
    assert!(
        crate::durability::wait_until_dead(&pid),
        "the agent {pid} outlived the run"
    );
}
