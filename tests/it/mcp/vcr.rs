//! VCR: sessions recorded with `MEKARA_VCR_CASSETTE`, replayed by `mekara vcr replay`
//! through the real session code with nothing run; the committed cassettes of the bundled
//! test scripts replay too.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::client::{Client, fixed_shuf_path};
use crate::common::Project;

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
        replay(&recorded.replace("version = 2", "version = 9")),
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

/// A workflow of the library (`flow/release`) played over MCP in a real JavaScript repository
/// and recorded: the person's answers come through the agent's `continue_compiled_script`, as
/// in Claude Code. The cassette then replays with nothing on `PATH` (no git, no npm): every
/// shell step's result comes from the cassette, and each reply must match the recorded one.
#[tokio::test]
async fn a_recorded_release_of_the_library_replays_without_git_or_npm() {
    use crate::library::{JS_CLI, commit_all, git, js_project, read};
    let project = js_project();
    git(&project, &["tag", "v1.2.3"]);
    project.write("cli.js", &format!("{JS_CLI}// explained\n"));
    commit_all(&project, "Explain the greeting");
    let cassette = project.dir.path().join("release.toml");
    let client = Client::start(&project, &[("MEKARA_VCR_CASSETTE", &cassette)]).await;
    let bump = client
        .call("start", json!({"name": "flow/release"}))
        .await
        .ok();
    assert!(bump.contains("Which part to bump?"), "{bump}");
    let draft = client.continue_with(json!({"answer": "minor"})).await.ok();
    assert!(
        draft.contains("draft the changelog entry for v1.3.0"),
        "{draft}"
    );
    let entry = "## v1.3.0\n\n- The greeting is explained.";
    let confirm = client.continue_with(json!({"entry": entry})).await.ok();
    assert!(
        confirm.contains("Release v1.3.0 with this changelog entry?"),
        "{confirm}"
    );
    client.continue_with(json!({"answer": "yes"})).await.ok();
    client.service.cancel().await.expect("close");
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v1.3.0");
    assert!(read(&project, "CHANGELOG.md").contains(entry));

    let empty = project.dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let mut replay = project.command(&["vcr", "replay", cassette.to_str().expect("utf-8")]);
    replay.env("PATH", &empty);
    let run = crate::common::run_with_stdin(replay, "");
    run.expect_code(0);
    assert!(
        run.stdout.contains("replayed 4 calls and 10 shell steps")
            && run.stdout.contains("every reply matched"),
        "{}",
        run.stdout
    );
}
