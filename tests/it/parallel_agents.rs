//! llm steps inside `parallel` in an unattended run (`--agent-command`): each member's llm
//! step goes to an agent process of its own, at once, at most `--max-parallel-agents`; each
//! answer is journaled with its member as it arrives, so a kill re-asks only the others.
//! The scripted agent logs every request in `calls.jsonl`.

use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use crate::common::{Project, wait_for};
use crate::unattended::{calls, gone, hang_pid};

/// Two llm members around a shell member; what they return is used after the group.
const GROVE: &str = r#"
def execute(request):
    auto("echo before")
    results = parallel([
        lambda: llm("Name a fruit.", expects = {"word": "a fruit"}).outputs["word"],
        lambda: auto("echo shell member").output.strip(),
        lambda: llm("Name a tree.", expects = {"word": "a tree"}).outputs["word"] + "!",
    ])
    auto("echo " + " ".join(results))
"#;

/// The scripted agent. A task (`… task N`) marks that it arrived (`arrived-N`) and waits,
/// at most 20 s, until every task in `wait_for` of `config.json` arrived too; while it
/// works, `running-N` exists, and it notes `overlap` when another task runs beside it. It
/// answers `config["N#ATTEMPT"]` when given (`{"hang": true}` hangs, with a child whose
/// pid goes to `hang.pid`), else `{"word": "word-N"}` in a session of its own.
const AGENT: &str = r#"
import glob, json, os, sys, time
req = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps(req) + "\n")
try:
    config = json.load(open(os.path.join(here, "config.json")))
except FileNotFoundError:
    config = {}
task = req["step"].rsplit(" task ", 1)[1] if " task " in req["step"] else "main"
if glob.glob(os.path.join(here, "running-*")):
    open(os.path.join(here, "overlap"), "w").write("")
running = os.path.join(here, "running-" + task)
open(running, "w").write("")
open(os.path.join(here, "arrived-" + task), "w").write("")
deadline = time.time() + 20
while not all(os.path.exists(os.path.join(here, "arrived-" + t)) for t in config.get("wait_for", [])):
    if time.time() > deadline:
        os.remove(running)
        print(json.dumps({"error": "the other tasks never arrived"}))
        sys.exit(0)
    time.sleep(0.02)
answer = config.get("%s#%d" % (task, req["attempt"]))
if isinstance(answer, dict) and answer.get("hang"):
    pid = os.spawnlp(os.P_NOWAIT, "sleep", "sleep", "300")
    open(os.path.join(here, "hang.pid"), "w").write(str(pid))
    open(os.path.join(here, "hanging"), "w").write("")
    time.sleep(300)
if answer is None:
    props = req["output_schema"]["properties"]
    answer = {"outputs": {k: "%s-%s" % (k, task) for k in props},
              "session": "sess-" + task, "cost_usd": 0.5}
os.remove(running)
print(json.dumps(answer))
"#;

const AGENT_COMMAND: &str = "python3 agent/agent.py";

fn project(config: &Json) -> Project {
    let project = Project::new();
    project.script("grove", "Name a fruit and a tree.", Some(GROVE));
    project.write("agent/agent.py", AGENT);
    project.write("agent/config.json", &config.to_string());
    project
}

/// The steps the agent was asked about, sorted (tasks arrive in any order).
fn asked(project: &Project) -> Vec<String> {
    let mut steps: Vec<String> = calls(project)
        .iter()
        .map(|c| format!("{}#{}", c["step"].as_str().expect("a step"), c["attempt"]))
        .collect();
    steps.sort();
    steps
}

/// The llm records of the run's journal: (member, outputs, agent session).
fn answered(project: &Project) -> Vec<(Json, Json, Json)> {
    let id = project.run_ids().pop().expect("a run");
    project
        .journal(&id)
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).expect("json line"))
        .filter(|e| e["event"] == "step" && e["input"]["kind"] == "llm")
        .map(|e| {
            (
                e["parallel"]["member"].clone(),
                e["result"]["outputs"].clone(),
                e["result"]["agent"]["session"].clone(),
            )
        })
        .collect()
}

fn run(project: &Project, extra: &[&str]) -> crate::common::Run {
    let mut args = vec!["run", "--agent-command", AGENT_COMMAND];
    args.extend_from_slice(extra);
    args.push("grove");
    project.run(&args, "")
}

#[test]
fn llm_members_go_to_agents_at_once_and_their_outputs_come_back_in_order() {
    // Each task waits for the other: the run ends only if both were out at once.
    let project = project(&json!({"wait_for": ["0", "2"]}));
    let run = run(&project, &[]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("echo word-0 shell member word-2!"),
        "{}",
        run.stderr
    );
    assert_eq!(asked(&project), ["grove[1] task 0#1", "grove[1] task 2#1"]);
    // Each task in a session of its own, never the run's: a new one each time.
    assert!(calls(&project).iter().all(|c| c["agent_session"].is_null()));
    // Regression: a task lacked the context a single llm step gets, the script's NL source.
    for call in calls(&project) {
        let prompt = call["prompt"].as_str().expect("a prompt");
        assert!(
            prompt.contains(
                "This step belongs to the compiled script `grove`. Its NL source, for context only"
            ) && prompt.contains("<nl-source>\nName a fruit and a tree.\n</nl-source>"),
            "{prompt}"
        );
    }
    let mut answers = answered(&project);
    answers.sort_by_key(|a| a.0.to_string());
    assert_eq!(
        answers,
        [
            (json!(0), json!({"word": "word-0"}), json!("sess-0")),
            (json!(2), json!({"word": "word-2"}), json!("sess-2")),
        ]
    );
}

#[test]
fn max_parallel_agents_bounds_the_agents_at_once() {
    let project = project(&json!({}));
    run(&project, &["--max-parallel-agents", "1"]).expect_code(0);
    assert_eq!(asked(&project), ["grove[1] task 0#1", "grove[1] task 2#1"]);
    assert!(
        !project.root().join("agent/overlap").exists(),
        "two agents ran at once under --max-parallel-agents 1"
    );
    let zero = run(&project, &["--max-parallel-agents", "0"]);
    zero.expect_code(2);
    assert!(
        zero.stderr.contains("--max-parallel-agents"),
        "{}",
        zero.stderr
    );
}

#[test]
fn a_task_answered_with_the_wrong_outputs_is_asked_again_once_with_the_error() {
    let project = project(&json!({"2#1": {"outputs": {"tree": "oak"}}}));
    let run = run(&project, &[]);
    run.expect_code(0);
    assert_eq!(
        asked(&project),
        [
            "grove[1] task 0#1",
            "grove[1] task 2#1",
            "grove[1] task 2#2"
        ]
    );
    let again = calls(&project)
        .into_iter()
        .find(|c| c["attempt"] == 2)
        .expect("asked again");
    let error = again["previous_error"].as_str().expect("the error");
    assert!(error.contains("`word`"), "{error}");
    assert!(error.contains("`tree`"), "{error}");
    assert!(run.stderr.contains("echo word-0 shell member word-2!"));
}

#[test]
fn a_task_wrong_twice_fails_the_group_and_the_script_falls_back() {
    let wrong = json!({"outputs": {"tree": "oak"}});
    let project = project(&json!({"2#1": wrong, "2#2": wrong}));
    let run = run(&project, &["--json", "--fallback", "agent"]);
    let calls = calls(&project);
    let fallback = calls.iter().find(|c| c["kind"] == "fallback");
    assert!(fallback.is_some(), "no fallback asked: {}", run.stderr);
    // The failed task is journaled as failed, with its member.
    let id = project.run_ids().pop().expect("a run");
    assert!(
        project
            .journal(&id)
            .lines()
            .any(|l| l.contains(r#""parallel":{"group":1,"member":2}"#)
                && l.contains(r#""success":false"#)),
        "{}",
        project.journal(&id)
    );
}

#[test]
fn a_killed_run_resumes_asking_only_the_tasks_not_answered() {
    let project = project(&json!({"2#1": {"hang": true}}));
    let mut child = project
        .command(&["run", "--agent-command", AGENT_COMMAND, "grove"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn mekara");
    wait_for(&project.root().join("agent/hanging"));
    // Task 0's answer is journaled as it arrives, while task 2 still works.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !answered(&project).iter().any(|a| a.0 == json!(0)) {
        assert!(
            Instant::now() < deadline,
            "task 0's answer was never journaled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL mekara");
    child.wait().expect("reap mekara");
    let pid = hang_pid(&project);
    project.write("agent/config.json", "{}");
    let id = project.run_ids().pop().expect("a run");
    let resumed = project.run(
        &["run", "--resume", &id, "--agent-command", AGENT_COMMAND],
        "",
    );
    resumed.expect_code(0);
    assert!(resumed.stderr.contains("echo word-0 shell member word-2!"));
    assert_eq!(
        asked(&project),
        [
            "grove[1] task 0#1",
            "grove[1] task 2#1",
            "grove[1] task 2#1"
        ],
        "task 0 was not asked again; task 2, killed, was"
    );
    // The resume killed the hanging agent's process group, noted on a line of its own.
    assert!(
        gone(pid),
        "the orphaned agent {pid} still runs after the resume"
    );
    // And journaled the killed attempt as task 2's step, the number its answer then took.
    let events: Vec<Json> = project
        .journal(&id)
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).expect("json line"))
        .collect();
    let task_2 = events
        .iter()
        .find(|e| e["event"] == "step" && e["parallel"]["member"] == json!(2))
        .map(|e| e["index"].clone())
        .expect("task 2's answer");
    let killed: Vec<(Json, Json)> = events
        .iter()
        .filter(|e| e["event"] == "killed")
        .map(|e| (e["depth"].clone(), e["index"].clone()))
        .collect();
    assert_eq!(killed, [(json!(0), task_2)], "{}", project.journal(&id));
}
#[test]
fn in_the_terminal_the_tasks_are_asked_one_after_another_and_each_journaled() {
    let project = project(&json!({}));
    let run = mekara_snapshot!(project, project.run(&["run", "grove"], "apple\noak\n"));
    mekara_snapshot!(project, run);
    let mut answers = answered(&project);
    answers.sort_by_key(|a| a.0.to_string());
    assert_eq!(
        answers,
        [
            (json!(0), json!({"word": "apple"}), Json::Null),
            (json!(2), json!({"word": "oak"}), Json::Null),
        ]
    );
}

#[tokio::test]
async fn over_mcp_the_tasks_are_one_pending_item_finished_by_one_continue_keyed_by_task() {
    let project = project(&json!({}));
    let client = crate::mcp::client::Client::start(&project, &[]).await;
    let snap = |name: &str, text: &str| {
        insta::assert_snapshot!(name.to_string(), project.scrub(text));
    };
    let started = client
        .call("start", json!({"name": "grove", "arguments": ""}))
        .await
        .ok();
    snap("mcp_tasks_pending", &started);
    let run_id = crate::mcp::client::handle(&started);
    let call = |outputs: Json| {
        client.call(
            "continue_compiled_script",
            json!({"run_id": run_id, "outputs": outputs}),
        )
    };
    // A task left out, one's outputs of the wrong shape: refused, nothing journaled.
    let missing = call(json!({"0": {"word": "apple"}})).await.err();
    assert!(missing.contains("`2`"), "{missing}");
    let wrong = call(json!({"0": {"word": "apple"}, "2": {"tree": "oak"}}))
        .await
        .err();
    snap("mcp_tasks_wrong_outputs", &wrong);
    assert!(answered(&project).is_empty());
    let done = call(json!({"0": {"word": "apple"}, "2": {"word": "oak"}}))
        .await
        .ok();
    assert!(done.contains("apple shell member oak!"), "{done}");
    let mut answers = answered(&project);
    answers.sort_by_key(|a| a.0.to_string());
    assert_eq!(
        answers,
        [
            (json!(0), json!({"word": "apple"}), Json::Null),
            (json!(2), json!({"word": "oak"}), Json::Null),
        ]
    );
}

/// Five llm members, nothing else.
const ORCHARD: &str = r#"
def execute(request):
    words = parallel([lambda: llm("Name a fruit.", expects = ["word"]).outputs["word"]] * 5)
    auto("echo " + " ".join(words))
"#;

/// Regression: the limits were checked only before a `parallel` group, so a group of five
/// agent tasks all ran under `--max-agent-steps 2` or a spent `--max-cost`. A limit now stops
/// new tasks from starting (those started finish and are journaled), and the run resumes
/// with the tasks not asked.
#[test]
fn limits_stop_the_tasks_of_a_group_from_starting_and_the_run_resumes_with_the_rest() {
    for (limit, value, started, stopped_by) in [
        (
            "--max-agent-steps",
            "2",
            2,
            "stopped before `orchard[0] task 2`: the run has had 2 agent answers (`--max-agent-steps 2`)",
        ),
        // One agent at a time: each answer costs $0.50, so a third task would start past $0.75.
        (
            "--max-cost",
            "0.75",
            2,
            "stopped before `orchard[0] task 2`: the run's agents spent $1.0000 (`--max-cost 0.75`)",
        ),
    ] {
        let project = project(&json!({}));
        project.script("orchard", "Name fruits.", Some(ORCHARD));
        let mut args = vec![
            "run",
            "--json",
            "--agent-command",
            AGENT_COMMAND,
            limit,
            value,
        ];
        if limit == "--max-cost" {
            // Stopped, as today, rather than paused for a person.
            args.extend(["--max-parallel-agents", "1", "--on-cap", "stop"]);
        }
        args.push("orchard");
        let run = project.run(&args, "");
        run.expect_code(1);
        let summary: Json = serde_json::from_str(&run.stdout).expect("a JSON summary");
        assert_eq!(summary["state"], "stopped", "{limit}: {summary:#}");
        assert_eq!(summary["stopped_by"], stopped_by, "{limit}");
        assert_eq!(calls(&project).len(), started, "{limit}: {}", run.stderr);
        assert_eq!(
            answered(&project).len(),
            started,
            "{limit}: the started tasks are kept"
        );
        let id = summary["run_id"].as_str().expect("a run id");
        project
            .run(
                &["run", "--resume", id, "--agent-command", AGENT_COMMAND],
                "",
            )
            .expect_code(0);
        assert_eq!(
            calls(&project).len(),
            5,
            "{limit}: only the tasks not asked"
        );
        assert_eq!(answered(&project).len(), 5);
    }
}
