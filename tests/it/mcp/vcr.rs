//! VCR: sessions recorded with `MEKARA_VCR_CASSETTE`, replayed by `mekara vcr replay`
//! through the real session code with nothing run; the committed cassettes of the bundled
//! test scripts replay too, and each workflow of the library (`flow/*`) is recorded on its
//! fixture and replayed in another folder.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use super::client::{Client, Reply, fixed_shuf_path};
use crate::common::Project;
use crate::library::{self, Case};

fn cassettes() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cassettes")
}

/// Records test:random played to the end, with a wrong call on the way; its `shuf` picks 1
/// ([`fixed_shuf_path`]), so the cassette is the same on every run.
async fn record_random(project: &Project, cassette: &Path) {
    let path = fixed_shuf_path(project);
    let client = Client::start(
        project,
        &[("MEKARA_VCR_CASSETTE", cassette), ("PATH", &path)],
    )
    .await;
    client.call("finish_nl_script", json!({})).await.err();
    client
        .call("start", json!({"name": "test/random"}))
        .await
        .ok();
    client
        .call(
            "continue_compiled_script",
            json!({"outputs": {"guess": 50}}),
        )
        .await
        .ok();
    client.call("status", json!({})).await.ok();
    client
        .call("continue_compiled_script", json!({"outputs": {}}))
        .await
        .ok();
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn a_recorded_session_replays_without_running_anything() {
    let project = Project::new();
    let cassette = project.dir.path().join("random.toml");
    record_random(&project, &cassette).await;
    // Multi-line texts stay multi-line.
    let text = std::fs::read_to_string(&cassette).expect("cassette");
    insta::assert_snapshot!("recorded_cassette", project.scrub(&text));

    // Replayed with no `shuf` on PATH: nothing runs.
    let empty = project.dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let run = crate::common::run_with_stdin(
        {
            let mut cmd = project.command(&["vcr", "replay", cassette.to_str().expect("utf-8")]);
            cmd.env("PATH", &empty);
            cmd
        },
        "",
    );
    run.expect_code(0);
    mekara_snapshot!("replayed_without_shuf", project, run);
    assert!(
        project.run_ids().len() == 1,
        "the replay journals elsewhere"
    );
}

#[tokio::test]
async fn a_replay_fails_at_the_first_difference() {
    let project = Project::new();
    let cassette = project.dir.path().join("random.toml");
    record_random(&project, &cassette).await;
    let recorded = std::fs::read_to_string(&cassette).expect("cassette");
    let replay = |text: &str| {
        std::fs::write(&cassette, text).expect("write");
        project.run(&["vcr", "replay", cassette.to_str().expect("utf-8")], "")
    };

    let mut seen = Vec::new();
    let mut failed = |what: &str, run: crate::common::Run| {
        run.expect_code(1);
        seen.push(format!("# {what}\n{}", project.transcript(&run)));
    };
    failed(
        "a step's input differs",
        replay(&recorded.replace("shuf -i 1-100 -n 1", "shuf -i 1-10 -n 1")),
    );

    // The recording has an effect the replay never asks for.
    let at = recorded
        .find("[[event]]\nkind = \"shell\"")
        .expect("a shell event");
    let end = at
        + recorded[at + 1..]
            .find("[[event]]")
            .expect("an event after it")
        + 1;
    let doubled = format!("{}{}", &recorded[..end], &recorded[at..]);
    failed("an effect more than the replay asks for", replay(&doubled));
    failed(
        "a reply's text differs",
        replay(&recorded.replacen("Nothing is pending", "Nothing pending", 1)),
    );
    // Malformed cassettes are named as such, with the place.
    failed(
        "a malformed cassette",
        replay(&recorded.replacen("[[event]]", "[[event]", 1)),
    );
    failed(
        "a version mekara does not know",
        replay(&recorded.replace("version = 3", "version = 9")),
    );
    failed(
        "the last call has no reply",
        replay(&recorded[..recorded.rfind("[[event]]").expect("events")]),
    );
    failed(
        "no such cassette",
        project.run(&["vcr", "replay", "/no/such/cassette.toml"], ""),
    );
    insta::assert_snapshot!(seen.join("\n"));
}

#[test]
fn committed_cassettes_replay() {
    let mut replayed = 0;
    for name in ["test-random.toml", "test-nested.toml"] {
        let project = Project::new();
        let cassette = cassettes().join(name);
        let run = project.run(&["vcr", "replay", cassette.to_str().expect("utf-8")], "");
        mekara_snapshot!(format!("committed_{name}"), project, run);
        replayed += 1;
    }
    assert_eq!(replayed, 2);
}

/// Writes the committed cassettes anew: `cargo test --release --test mcp -- --ignored
/// record_committed_cassettes`, then review the diff.
#[tokio::test]
#[ignore = "writes tests/cassettes; run by hand to re-record"]
async fn record_committed_cassettes() {
    std::fs::create_dir_all(cassettes()).expect("mkdir");
    let project = Project::new();
    record_random(&project, &cassettes().join("test-random.toml")).await;

    let project = Project::new();
    let cassette = cassettes().join("test-nested.toml");
    let client = Client::start(&project, &[("MEKARA_VCR_CASSETTE", &cassette)]).await;
    client.call("list_scripts", json!({"all": true})).await.ok();
    client
        .call("start", json!({"name": "test:nested"}))
        .await
        .ok();
    client
        .call("continue_compiled_script", json!({"outputs": {"guess": 7}}))
        .await
        .ok();
    client
        .call("continue_compiled_script", json!({"outputs": {}}))
        .await
        .ok();
    client
        .call("continue_compiled_script", json!({"outputs": {}}))
        .await
        .err();
    client.call("finish_nl_script", json!({})).await.ok();
    client.call("status", json!({})).await.ok();
    client
        .call("continue_compiled_script", json!({"outputs": {}}))
        .await
        .ok();
    client.service.cancel().await.expect("close");
}

/// Regression: the run id in a cassette named the journal's file unchecked, so a cassette
/// could make the replay create files anywhere (`../`, an absolute path).
#[test]
fn a_cassette_run_id_that_is_not_a_plain_name_is_refused() {
    let project = Project::new();
    let recorded = std::fs::read_to_string(cassettes().join("test-random.toml")).expect("cassette");
    let outside = project.dir.path().join("outside");
    for id in [
        format!("{}/escaped", outside.display()),
        "../../../escaped".to_string(),
        "a/b".to_string(),
        String::new(),
        "x".repeat(65),
    ] {
        let cassette = project.dir.path().join("evil.toml");
        std::fs::write(
            &cassette,
            recorded.replacen(
                "id = \"20261122-035811-2c67\"",
                &format!("id = \"{id}\""),
                1,
            ),
        )
        .expect("write");
        let run = project.run(&["vcr", "replay", cassette.to_str().expect("utf-8")], "");
        run.expect_code(1);
        assert_eq!(
            run.stderr,
            format!(
                "error: cassette `{}` is malformed: event 4 has run id `{id}`, which is not a run id (ASCII letters, digits, `-` and `_`, at most 64)\n",
                cassette.display()
            )
        );
        assert!(!outside.exists(), "nothing is written outside");
    }
}

/// Regression (issue 31): a replay of a session that ejected a script failed in another
/// checkout, because replies (a refused `eject_script`, a Starlark error's location) hold
/// the recording project's absolute paths. Cassettes hold them relative to the project, so a
/// session recorded in one folder replays in a copy of it elsewhere; a cassette of the old
/// kind still replays where it was recorded.
#[tokio::test]
async fn a_session_that_ejected_a_script_replays_in_another_checkout() {
    // A function step that fails: its error names the script's file (a `fail()` in
    // `execute` would stop the run, with the message alone).
    const BROKEN: &str = "def execute(request):\n    auto(\"true\")\n    auto(broken)\n\ndef broken():\n    fail(\"broken on purpose\")\n";
    let recording = Project::new();
    let checkout = Project::new();
    for project in [&recording, &checkout] {
        project.script("broken", "1. Break.\n", Some(BROKEN));
    }
    let cassette = recording.dir.path().join("ejected.toml");
    let client = Client::start(&recording, &[("MEKARA_VCR_CASSETTE", &cassette)]).await;
    let copied = client
        .call("eject_script", json!({"name": "test/random"}))
        .await
        .ok();
    assert!(copied.contains("Copied"), "{copied}");
    let refused = client
        .call("eject_script", json!({"name": "test/random"}))
        .await
        .err();
    let root = recording.root().display().to_string();
    assert!(
        refused.contains(&root),
        "the agent reads the path: {refused}"
    );
    let fell_back = client.call("start", json!({"name": "broken"})).await.ok();
    assert!(
        fell_back.contains(&root) && fell_back.contains("broken on purpose"),
        "{fell_back}"
    );
    client.service.cancel().await.expect("close");
    let recorded = std::fs::read_to_string(&cassette).expect("cassette");
    assert!(
        !recorded.contains(&root),
        "no absolute path of the recording project: {recorded}"
    );
    assert!(recorded.contains("`.mekara/scripts/nl/test/random.md` already exists"));

    let replay = |project: &Project, cassette: &Path| {
        project.run(&["vcr", "replay", cassette.to_str().expect("utf-8")], "")
    };
    let run = replay(&checkout, &cassette);
    run.expect_code(0);
    assert!(run.stdout.contains("every reply matched"), "{}", run.stdout);

    // A cassette of the old kind, with absolute paths, replays where it was recorded (in a
    // fresh copy of that folder: the replay ejects again).
    let old = recording.dir.path().join("old.toml");
    std::fs::write(
        &old,
        recorded.replace(
            ".mekara/scripts/compiled/broken.star",
            &format!("{root}/.mekara/scripts/compiled/broken.star"),
        ),
    )
    .expect("write");
    std::fs::remove_dir_all(recording.root().join(".mekara/scripts/nl/test")).expect("rm");
    std::fs::remove_dir_all(recording.root().join(".mekara/scripts/compiled/test")).expect("rm");
    replay(&recording, &old).expect_code(0);
}

/// Regression: a shell step's output that names the project's folder (cargo's `Compiling
/// adder v0.4.1 (/home/ann/adder)`, a Python traceback's file) was recorded as printed, so in
/// another checkout the replayed reply named the recording's folder and did not match; nor
/// would a step whose command the script built from such an output. Cassettes write that
/// folder as a placeholder, which a replay fills with its own.
#[tokio::test]
async fn a_step_that_prints_the_projects_folder_replays_in_another_checkout() {
    const WHERE: &str = "def execute(request):\n    here = auto(\"pwd\").output.strip()\n    auto(\"cat \" + here + \"/notes.txt\")\n";
    let recording = Project::new();
    let checkout = Project::new();
    for project in [&recording, &checkout] {
        project.script("where", "1. Show the notes.\n", Some(WHERE));
    }
    recording.write("notes.txt", "the notes\n");
    let cassette = recording.dir.path().join("where.toml");
    let client = Client::start(&recording, &[("MEKARA_VCR_CASSETTE", &cassette)]).await;
    let reply = client.call("start", json!({"name": "where"})).await.ok();
    assert!(reply.contains("the notes"), "{reply}");
    client.service.cancel().await.expect("close");
    let recorded = std::fs::read_to_string(&cassette).expect("cassette");
    let root = recording.root().display().to_string();
    assert!(!recorded.contains(&root), "{recorded}");
    assert!(
        recorded.contains("command = \"cat {{mekara:project}}/notes.txt\""),
        "{recorded}"
    );
    let empty = checkout.dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let mut replay = checkout.command(&["vcr", "replay", cassette.to_str().expect("utf-8")]);
    replay.env("PATH", &empty);
    let run = crate::common::run_with_stdin(replay, "");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}

/// Plays a workflow of the library over MCP as an agent in a client does, recording the
/// session, checks what it changed as the unattended test does, then replays the cassette in
/// another folder, without the fixture's files and with nothing on `PATH` (no git, cargo, npm
/// or python): every shell step's result comes from the cassette, and each reply must match
/// the recorded one.
async fn recorded_and_replayed(case: Case) {
    let project = &case.project;
    let cassette = project.dir.path().join("cassette.toml");
    let client = start_case(&case, Some(&cassette)).await;
    let played = play(&case, &client, usize::MAX).await;
    let reply = played
        .replies
        .last()
        .map(|r| r.text.clone())
        .unwrap_or_default();
    let calls = played.replies.len();
    client.service.cancel().await.expect("close");
    assert!(reply.contains("The script completed"), "{reply}");
    assert_eq!(
        played.answered,
        case.answers.len(),
        "every answer is asked for"
    );
    case.check_effects();

    let recorded = std::fs::read_to_string(&cassette).expect("cassette");
    let shells = recorded.matches("[[event]]\nkind = \"shell\"").count();
    assert!(shells > 0, "{recorded}");
    // In another folder, without the fixture's files: the cassette is all it takes.
    let elsewhere = Project::new();
    let empty = elsewhere.dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let mut replay = elsewhere.command(&["vcr", "replay", cassette.to_str().expect("utf-8")]);
    replay.env("PATH", &empty);
    let run = crate::common::run_with_stdin(replay, "");
    assert!(
        run.code == Some(0)
            && run
                .stdout
                .contains(&format!("replayed {calls} calls and {shells} shell steps"))
            && run.stdout.contains("every reply matched"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}

/// `mekara mcp` for `case`: in its project, with the tools its checks need, its `PATH` and,
/// when `cassette` is given, recording to it.
pub(crate) async fn start_case(case: &Case, cassette: Option<&Path>) -> Client {
    let mut env: Vec<(String, PathBuf)> = library::with_tools(Command::new("mekara"))
        .get_envs()
        .filter_map(|(key, value)| Some((key.to_str()?.to_string(), PathBuf::from(value?))))
        .collect();
    if let Some(cassette) = cassette {
        env.push(("MEKARA_VCR_CASSETTE".to_string(), cassette.to_path_buf()));
    }
    if let Some(path) = case.path {
        env.push(("PATH".to_string(), PathBuf::from(path)));
    }
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (k.as_str(), v.as_path())).collect();
    Client::start(&case.project, &env).await
}

/// What [`play`] saw: every reply, in order, and how many questions it answered.
pub(crate) struct Played {
    pub(crate) replies: Vec<Reply>,
    pub(crate) answered: usize,
}

/// Starts `case`'s workflow and plays at most `turns` of its pending items as an agent does.
/// Each reply's pending item decides the next call: a question gets the person's next answer
/// and an llm step the case's plan (its first rule whose `when` is in the step: `run` runs in
/// the project, `outputs` are given), both through `continue_compiled_script`. The llm steps
/// are logged in `agent/calls.jsonl` as the scripted agent of the unattended tests logs them,
/// for the case's checks. Stops at a reply that is an error, has nothing pending or a failure
/// to finish by hand, or has an item the case has no answer or rule for (the caller says
/// whether that is wrong).
pub(crate) async fn play(case: &Case, client: &Client, turns: usize) -> Played {
    let project = &case.project;
    let start = json!({"name": case.name, "arguments": case.arguments.join(" ")});
    let mut replies = vec![client.call("start", start).await];
    let mut answers = case.answers.iter().enumerate();
    let mut answered = 0;
    let mut log = String::new();
    for _ in 0..turns {
        let Some(reply) = replies.last().filter(|r| !r.is_error) else {
            break;
        };
        let Some((_, turn)) = reply.text.rsplit_once("## Your turn") else {
            break;
        };
        let outputs = if turn.starts_with(": ask the user") {
            let Some((index, answer)) = answers.next() else {
                break;
            };
            case.before_answer(index);
            answered += 1;
            json!({ "answer": answer })
        } else if turn.starts_with(": llm step") {
            log.push_str(&format!(
                "{}\n",
                json!({"kind": "llm", "prompt": reply.text})
            ));
            project.write("agent/calls.jsonl", &log);
            let Some(rule) = case
                .plan
                .as_array()
                .into_iter()
                .flatten()
                .find(|rule| rule["when"].as_str().is_some_and(|w| turn.contains(w)))
            else {
                break;
            };
            if let Some(run) = rule["run"].as_str() {
                let ran = project.shell(run).output().expect("sh");
                assert!(ran.status.success(), "{run}: {ran:?}");
            }
            rule["outputs"].clone()
        } else {
            break;
        };
        replies.push(client.continue_with(outputs).await);
    }
    Played { replies, answered }
}

/// One test per workflow of the library: `NAME` is played by [`recorded_and_replayed`] on
/// the case `library::NAME`.
macro_rules! recorded_workflows {
    ($($name:ident),* $(,)?) => {
        mod recorded {
            $(
                #[tokio::test]
                async fn $name() {
                    super::recorded_and_replayed(crate::library::$name()).await;
                }
            )*
        }
    };
}

recorded_workflows!(
    commit,
    pr,
    review,
    fix_ci,
    release,
    upgrade_deps,
    docs_sync,
    triage,
    test_gaps,
    bisect,
);
