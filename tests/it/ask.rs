//! `ask()`, the human gate: a question only the person answers. At `mekara run` (piped
//! stdin, one line per answer), over MCP (the agent passes the user's answer on with
//! `continue_compiled_script`), and in unattended runs, which stop, resumable, until `mekara
//! answer RUN_ID VALUE` gives it. A timeout fails the step; an answered question is never
//! asked again.

use std::io::Write as _;
use std::process::Stdio;

use serde_json::{Value as Json, json};

use crate::common::{Project, Run, wait_for};
use crate::mcp::client::Client;

const NL: &str = "---\ndescription: Build, ask, deploy\n---\n1. Build.\n2. Ask the user whether to deploy.\n3. Deploy where they said.\n";

/// A shell step, the question, then a step that uses the answer.
const DEPLOY: &str = r#"
def execute(request):
    auto("echo built", context = "Step 1: build")
    r = ask("Deploy to production?", choices = ["yes", "no"])
    auto("echo deploying: " + r.answer, context = "Step 3: deploy")
"#;

fn project(star: &str) -> Project {
    let project = Project::new();
    project.script("deploy", NL, Some(star));
    project
}

/// The journaled steps of run `id`, as JSON.
fn steps(project: &Project, id: &str) -> Vec<Json> {
    project
        .journal(id)
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).expect("json line"))
        .filter(|e| e["event"] == "step")
        .collect()
}

/// The one `ask` step of run `id`.
fn ask_step(project: &Project, id: &str) -> Json {
    let asks: Vec<Json> = steps(project, id)
        .into_iter()
        .filter(|s| s["input"]["kind"] == "ask")
        .collect();
    assert_eq!(asks.len(), 1, "{asks:?}");
    asks[0].clone()
}

fn last_run(project: &Project) -> String {
    project.run_ids().pop().expect("a run")
}

#[test]
fn piped_answers_take_a_choice_or_its_number_and_a_wrong_one_fails_resumable() {
    let project = project(DEPLOY);
    let wrong = project.run(&["run", "deploy"], "maybe\n");
    wrong.expect_code(1);
    mekara_snapshot!("piped_wrong_choice", project, wrong);
    let id = last_run(&project);
    // Nothing was journaled for the wrong answer: the run waits for one still.
    assert!(
        steps(&project, &id)
            .iter()
            .all(|s| s["input"]["kind"] != "ask")
    );
    mekara_snapshot!(project, project.run(&["runs"], ""));

    // Not an ended run: prune leaves it unless asked for it by its state.
    let kept = project.run(&["runs", "prune", "--keep", "0", "--dry-run"], "");
    assert!(!kept.stdout.contains(&id), "{}", kept.stdout);
    // Not pinned: the dry run says how many bytes the run takes, which varies.
    let named = project.run(&["runs", "prune", "--state", "waiting", "--dry-run"], "");
    assert!(named.stdout.contains(&id), "{}", named.stdout);

    // Resumed, the question comes again; its number picks the choice.
    let resumed = project.run(&["run", "--resume", &id], "2\n");
    resumed.expect_code(0);
    mekara_snapshot!("piped_answer_by_number", project, resumed);
    let step = ask_step(&project, &id);
    assert_eq!(step["result"]["answer"], "no");
    assert_eq!(step["result"]["answered_by"], "terminal");

    // As written, in a new run.
    mekara_snapshot!(project, project.run(&["run", "deploy"], "yes\n"));
}

#[test]
fn at_a_terminal_a_wrong_choice_is_refused_and_asked_again() {
    let project = project(DEPLOY);
    let run =
        crate::terminal::typed_on_a_terminal(&project.command(&["run", "deploy"]), "maybe\nyes\n");
    run.expect_code(0);
    mekara_snapshot!("terminal_asked_again", project, run);
    let id = last_run(&project);
    assert_eq!(ask_step(&project, &id)["result"]["answer"], "yes");
}

#[test]
fn a_question_without_choices_takes_any_answer_and_returns_a_result_struct() {
    let project = project(
        r#"
def execute(request):
    r = ask("Which branch?\nName it exactly.")
    auto("echo branch=" + r.answer + " success=" + str(r.success) + " error=" + str(r.error))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "deploy"], "feature/x y\n"));
}

/// Found by a model playing the agent (issue 28): at `mekara run`, an answer of several
/// lines could not be typed (a JSON string with `\n` was kept as typed), and nothing said
/// so. The prompt says how: a line of `"""` alone opens a block and another closes it,
/// piped as at a terminal, for a question and for an llm step's output alike; a single line
/// is still the answer as typed.
#[test]
fn an_answer_of_several_lines_is_typed_between_lines_of_triple_quotes() {
    let project = project(
        r#"
def execute(request):
    r = ask("What goes in the changelog?")
    g = llm("Write the release notes.", expects = {"notes": "the notes", "title": "a title"})
    auto(say, {"text": r.answer + "|" + g.outputs["notes"] + "|" + g.outputs["title"]})

def say(text):
    print(text.replace("\n", "<NL>"))
"#,
    );
    mekara_snapshot!(project, project.run(
        &["run", "deploy"],
        "\"\"\"\n- fixed the parser\n- added `--json`\n\"\"\"\n\"\"\"\nline one\n\nline three\n\"\"\"\nv1.2 \\n stays\n",
    ));
    let id = last_run(&project);
    assert_eq!(
        ask_step(&project, &id)["result"]["answer"],
        "- fixed the parser\n- added `--json`"
    );
}

#[test]
fn bad_choices_are_refused_with_what_to_write() {
    for choices in ["[]", "[\"a\", \"a\"]", "\"yes\"", "[1, 2]", "[\"\"]"] {
        let project = project(&format!(
            "def execute(request):\n    ask(\"Go?\", choices = {choices})\n"
        ));
        mekara_snapshot!(project, project.run(&["run", "deploy"], "\n"));
    }
}

#[tokio::test]
async fn over_mcp_the_agent_is_told_to_ask_the_user_and_a_wrong_choice_keeps_it_pending() {
    let project = project(DEPLOY);
    let client = Client::start(&project, &[]).await;
    let snap = |name: &str, text: &str| {
        insta::assert_snapshot!(name.to_string(), project.scrub(text));
    };
    let started = client.call("start", json!({"name": "deploy"})).await.ok();
    snap("mcp_question", &started);
    let handle = crate::mcp::client::handle(&started);

    let wrong = client
        .call(
            "continue_compiled_script",
            json!({"run_id": handle, "outputs": {"answer": "maybe"}}),
        )
        .await
        .err();
    snap("mcp_wrong_choice", &wrong);
    let misnamed = client
        .call(
            "continue_compiled_script",
            json!({"run_id": handle, "outputs": {"choice": "yes"}}),
        )
        .await
        .err();
    insta::assert_snapshot!("mcp_misnamed_answer", project.scrub(&misnamed));
    let finish = client
        .call("finish_nl_script", json!({"run_id": handle}))
        .await
        .err();
    insta::assert_snapshot!("mcp_finish_with_a_question_pending", project.scrub(&finish));
    // Still pending: `status` shows the question again.
    let status = client.call("status", json!({"run_id": handle})).await.ok();
    insta::assert_snapshot!("mcp_status_with_a_question_pending", project.scrub(&status));

    let answered = client
        .call(
            "continue_compiled_script",
            json!({"run_id": handle, "outputs": {"answer": "yes"}}),
        )
        .await
        .ok();
    snap("mcp_answered", &answered);
    let id = last_run(&project);
    let step = ask_step(&project, &id);
    assert_eq!(step["result"]["answer"], "yes");
    assert_eq!(step["result"]["answered_by"], "agent");
}

#[tokio::test]
async fn over_mcp_an_answer_after_the_timeout_fails_the_step_and_the_reply_says_so() {
    let project = project(
        r#"
def execute(request):
    ask("Deploy?", timeout = 0.2)
"#,
    );
    let client = Client::start(&project, &[]).await;
    let started = client.call("start", json!({"name": "deploy"})).await.ok();
    insta::assert_snapshot!("mcp_question_with_a_timeout", project.scrub(&started));
    let handle = crate::mcp::client::handle(&started);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let late = client
        .call(
            "continue_compiled_script",
            json!({"run_id": handle, "outputs": {"answer": "yes"}}),
        )
        .await
        .ok();
    insta::assert_snapshot!("mcp_too_late", project.scrub(&late));
    let step = ask_step(&project, &last_run(&project));
    assert_eq!(step["result"]["success"], false);
}

#[tokio::test]
async fn mcp_resume_takes_the_answer_of_a_run_waiting_for_one() {
    let project = project(DEPLOY);
    // The question is asked over MCP; the server goes away before the user answers.
    let first = Client::start(&project, &[]).await;
    let started = first.call("start", json!({"name": "deploy"})).await.ok();
    let handle = crate::mcp::client::handle(&started);
    first.service.cancel().await.expect("close");
    let id = last_run(&project);
    mekara_snapshot!(project, project.run(&["runs"], ""));

    let client = Client::start(&project, &[]).await;
    let listed = client.call("resume", json!({})).await.ok();
    assert!(listed.contains(&id), "{listed}");
    let without_run = client.call("resume", json!({"answer": "yes"})).await.err();
    insta::assert_snapshot!(
        "mcp_resume_answer_without_run_id",
        project.scrub(&without_run)
    );
    let wrong = client
        .call("resume", json!({"run_id": handle, "answer": "maybe"}))
        .await
        .err();
    insta::assert_snapshot!("mcp_resume_with_a_wrong_answer", project.scrub(&wrong));
    let answered = client
        .call("resume", json!({"run_id": handle, "answer": "yes"}))
        .await
        .ok();
    insta::assert_snapshot!("mcp_resume_with_answer", project.scrub(&answered));
    let step = ask_step(&project, &id);
    assert_eq!(step["result"]["answered_by"], "agent");
}

/// Found by a model playing the agent (issue 28): over MCP a question could be answered
/// two ways (`continue_compiled_script` with `outputs.answer`, and `resume` with `answer`),
/// and nothing said which to use. The tools and the replies name one,
/// `continue_compiled_script`, which also takes up a run that a restart interrupted; `resume`
/// with `answer` still works, and its reply names the preferred way for next time.
#[tokio::test]
async fn over_mcp_one_way_to_answer_is_named_and_it_takes_up_a_run_after_a_restart() {
    let project = project(DEPLOY);
    let first = Client::start(&project, &[]).await;
    let tools = first.service.list_all_tools().await.expect("tools/list");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tool `{name}`"))
            .clone()
    };
    let continue_text = tool("continue_compiled_script")
        .description
        .unwrap_or_default()
        .to_string();
    assert!(
        continue_text.contains("user's answer to a script's question")
            && continue_text.contains(r#"outputs: {"answer""#),
        "{continue_text}"
    );
    let resume_answer = tool("resume").input_schema["properties"]["answer"].clone();
    assert_eq!(resume_answer["deprecated"], true, "{resume_answer}");
    assert!(
        resume_answer["description"]
            .as_str()
            .is_some_and(|d| d.starts_with(
                "Kept for agents that already answer this way; prefer `continue_compiled_script`"
            )),
        "{resume_answer}"
    );
    // Asked, then the server goes away before the user answers.
    let started = first.call("start", json!({"name": "deploy"})).await.ok();
    assert!(!started.contains("`resume`"), "{started}");
    insta::assert_snapshot!(
        "mcp_question_names_one_way_to_answer",
        project.scrub(&started)
    );
    let handle = crate::mcp::client::handle(&started);
    let pid = first.pid;
    first.service.cancel().await.expect("close");
    while crate::mcp::client::alive(pid) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let id = last_run(&project);
    let second = Client::start(&project, &[]).await;
    let answered = second
        .call(
            "continue_compiled_script",
            json!({"run_id": handle, "outputs": {"answer": "yes"}}),
        )
        .await
        .ok();
    insta::assert_snapshot!("mcp_answered_after_a_restart", project.scrub(&answered));
    assert_eq!(ask_step(&project, &id)["result"]["answered_by"], "agent");
    // The other way still answers, and says which way to use next time.
    let again = second.call("start", json!({"name": "deploy"})).await.ok();
    let other = crate::mcp::client::handle(&again);
    let by_resume = second
        .call("resume", json!({"run_id": other, "answer": "no"}))
        .await
        .ok();
    insta::assert_snapshot!("mcp_answered_by_resume", project.scrub(&by_resume));
}

#[tokio::test]
async fn a_recorded_session_with_a_question_replays_without_asking() {
    let project = project(DEPLOY);
    let cassette = project.dir.path().join("ask.toml");
    let client = Client::start(&project, &[("MEKARA_VCR_CASSETTE", &cassette)]).await;
    client.call("start", json!({"name": "deploy"})).await.ok();
    client
        .call(
            "continue_compiled_script",
            json!({"outputs": {"answer": "maybe"}}),
        )
        .await
        .err();
    client
        .call(
            "continue_compiled_script",
            json!({"outputs": {"answer": "2"}}),
        )
        .await
        .ok();
    client.service.cancel().await.expect("close");
    mekara_snapshot!(
        project,
        project.run(&["vcr", "replay", cassette.to_str().expect("utf-8")], "")
    );
}

/// A scripted agent for `--agent-command`: logs each request's step, answers the llm steps
/// (which expect nothing) with no outputs.
const AGENT: &str = "cat > /dev/null; echo call >> agent-calls.log; echo '{\"outputs\": {}}'";

/// An llm step, the question, an llm step after it.
const UNATTENDED: &str = r#"
def execute(request):
    llm("Read the release notes.")
    r = ask("Deploy to production?", choices = ["yes", "no"])
    auto("echo deploying: " + r.answer, context = "Step 3: deploy")
    llm("Write the announcement.")
"#;

fn agent_calls(project: &Project) -> usize {
    crate::common::lines(&project.root().join("agent-calls.log"))
}

#[test]
fn unattended_runs_wait_for_mekara_answer_and_the_agent_never_answers_the_question() {
    let project = project(UNATTENDED);
    project.write("agent.sh", AGENT);
    let agent = "sh agent.sh";
    mekara_snapshot!(project, project.run(&["run", "--dry-run", "deploy"], ""));
    let stopped = project.run(&["run", "--agent-command", agent, "--json", "deploy"], "");
    stopped.expect_code(1);
    let summary: Json = serde_json::from_str(&stopped.stdout).expect("a JSON summary");
    assert_eq!(summary["state"], "waiting", "{summary}");
    assert_eq!(
        agent_calls(&project),
        1,
        "only the llm step before the question"
    );
    let id = last_run(&project);
    insta::assert_snapshot!("unattended_waiting_stderr", project.scrub(&stopped.stderr));
    mekara_snapshot!(project, project.run(&["runs"], ""));
    let show = project.run(&["runs", "show", &id], "");
    assert!(
        show.stdout.contains(&format!(
            "waiting for an answer: give it with `mekara answer {id} VALUE`"
        )),
        "{}",
        show.stdout
    );

    // Wrong answers, and an unknown run: refused, nothing journaled.
    let before = project.journal(&id);
    let not_a_choice = project.run(&["answer", &id, "maybe"], "");
    not_a_choice.expect_code(1);
    let unknown = project.run(&["answer", "20990101-000000-beef", "yes"], "");
    unknown.expect_code(2);
    let out_of_range = project.run(&["answer", &id, "3"], "");
    out_of_range.expect_code(1);
    assert_eq!(project.journal(&id), before);
    mekara_snapshot!(
        "answer_refusals",
        project,
        Run {
            code: not_a_choice.code,
            stdout: String::new(),
            stderr: format!(
                "{}{}{}",
                not_a_choice.stderr, unknown.stderr, out_of_range.stderr
            ),
        }
    );

    let answered = project.run(&["answer", &id, "yes"], "");
    answered.expect_code(0);
    mekara_snapshot!("answer_given", project, answered);
    mekara_snapshot!(project, project.run(&["answer", &id, "no"], ""));
    assert_eq!(ask_step(&project, &id)["result"]["answered_by"], "command");

    let resumed = project.run(
        &["run", "--resume", &id, "--agent-command", agent, "--json"],
        "",
    );
    resumed.expect_code(0);
    let summary: Json = serde_json::from_str(&resumed.stdout).expect("a JSON summary");
    assert_eq!(summary["state"], "completed", "{summary}");
    assert_eq!(
        agent_calls(&project),
        2,
        "the llm step after the question only"
    );
    assert!(
        steps(&project, &id)
            .iter()
            .any(|s| s["result"]["output"] == "deploying: yes\n")
    );
    // An ended run takes no answer.
    let ended = project.run(&["answer", &id, "yes"], "");
    ended.expect_code(2);
}

/// Runs `mekara ARGS` with stdin held open (nobody types) until the run's journal holds
/// `event` (by its name); then types an empty line, closes stdin and waits for the end.
fn run_typing_done_after(project: &Project, args: &[&str], event: &str) -> Run {
    let mut child = project.spawn(args);
    let mut stdin = child.stdin.take().expect("stdin");
    let wanted = format!("\"event\":\"{event}\"");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !project
        .run_ids()
        .last()
        .is_some_and(|id| project.journal(id).contains(&wanted))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no `{event}` event in the journal"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    stdin.write_all(b"done\n").expect("type done");
    drop(stdin);
    Run::from_output(child.wait_with_output().expect("wait"))
}

#[test]
fn a_question_not_answered_in_time_fails_the_step_and_allow_failure_gives_the_script_the_result() {
    let project = project(
        r#"
def execute(request):
    r = ask("Deploy?", choices = ["yes", "no"], timeout = 0.3, allow_failure = True)
    auto("echo success=" + str(r.success) + " answer=" + str(r.answer))
    r = ask("Really?", timeout = 0.3)
    auto("echo not reached")
"#,
    );
    // At the terminal, mekara stops waiting at the timeout; the second question's timeout
    // makes the frame fall back, and the person finishes it by hand.
    let run = run_typing_done_after(&project, &["run", "deploy"], "fail");
    run.expect_code(1);
    mekara_snapshot!("timeout_at_the_terminal", project, run);
    let id = last_run(&project);
    let asks: Vec<Json> = steps(&project, &id)
        .into_iter()
        .filter(|s| s["input"]["kind"] == "ask")
        .collect();
    assert_eq!(asks.len(), 2);
    assert_eq!(asks[0]["allow_failure"], true);
    assert!(
        asks[1]["result"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("no answer came within the timeout (300ms)")),
        "{asks:?}"
    );
}

#[test]
fn an_answer_later_than_the_timeout_fails_the_step_instead() {
    let project = project(
        r#"
def execute(request):
    llm("Read the notes.")
    r = ask("Deploy?", timeout = 1)
    auto("echo deploying: " + r.answer)
"#,
    );
    project.write("agent.sh", AGENT);
    let stopped = project.run(&["run", "--agent-command", "sh agent.sh", "deploy"], "");
    stopped.expect_code(1);
    let id = last_run(&project);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    mekara_snapshot!(project, project.run(&["answer", &id, "yes"], ""));
    let step = ask_step(&project, &id);
    assert_eq!(step["result"]["success"], false);
    assert_eq!(step["result"].get("answer"), None);

    // Resumed, the script falls back as from any failed step; `--retry` then asks the
    // question again, its timeout counting from the new asking.
    mekara_snapshot!(project, project.run(&["run", "--resume", &id], "\n"));
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "yes\n")
    );
}

#[test]
fn a_run_killed_after_the_answer_resumes_without_asking_again() {
    let project = project(
        r#"
def execute(request):
    r = ask("Deploy?", choices = ["yes", "no"])
    auto("touch started; while [ ! -e go ]; do sleep 0.05; done; echo deploying " + r.answer)
"#,
    );
    let mut child = project.spawn(&["run", "deploy"]);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"yes\n").expect("answer");
    wait_for(&project.root().join("started"));
    child.kill().expect("kill");
    child.wait().expect("wait");
    drop(stdin);
    let id = last_run(&project);
    project.write("go", "");
    let resumed = project
        .command(&["run", "--resume", &id])
        .stdin(Stdio::null())
        .output()
        .expect("resume");
    let resumed = Run::from_output(resumed);
    resumed.expect_code(0);
    assert!(
        !resumed.stdout.contains("── question"),
        "{}",
        resumed.stdout
    );
    assert!(
        resumed.stdout.contains("deploying yes"),
        "{}",
        resumed.stdout
    );
    assert_eq!(ask_step(&project, &id)["result"]["answer"], "yes");
}
