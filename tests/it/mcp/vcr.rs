//! VCR: sessions recorded with `MEKARA_VCR_CASSETTE`, replayed by `mekara vcr replay`
//! through the real session code with nothing run; the committed cassettes of the bundled
//! test scripts replay too.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::client::Client;
use crate::common::Project;

fn cassettes() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cassettes")
}

/// Records test:random played to the end, with a wrong call on the way.
async fn record_random(project: &Project, cassette: &Path) {
    let client = Client::start(project, &[("MEKARA_VCR_CASSETTE", cassette)]).await;
    client.call("finish_nl_script", json!({})).await.err();
    let first = client
        .call("start", json!({"name": "test/random"}))
        .await
        .ok();
    assert!(first.contains("guess"), "{first}");
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
    let text = std::fs::read_to_string(&cassette).expect("cassette");
    assert!(text.contains("kind = \"shell\""), "{text}");
    assert!(text.contains("command = \"shuf -i 1-100 -n 1\""), "{text}");
    assert!(
        text.contains("text = \"\"\"\n## Steps executed"),
        "multi-line texts stay multi-line:\n{text}"
    );

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
    assert!(
        run.stdout.contains("replayed 5 calls and 1 shell steps"),
        "{}",
        run.stdout
    );
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

    // A step's input differs.
    let changed = replay(&recorded.replace("shuf -i 1-100 -n 1", "shuf -i 1-10 -n 1"));
    changed.expect_code(1);
    assert!(
        changed.stderr.contains("differs at event"),
        "{}",
        changed.stderr
    );
    assert!(
        changed
            .stderr
            .contains("the replay ran shell step `shuf -i 1-100 -n 1`"),
        "{}",
        changed.stderr
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
    let extra = replay(&doubled);
    extra.expect_code(1);
    assert!(
        extra.stderr.contains("1 more effect(s) for this call")
            && extra.stderr.contains("shell step `shuf"),
        "{}",
        extra.stderr
    );

    // A reply's text differs.
    let changed = replay(&recorded.replacen("Nothing is pending", "Nothing pending", 1));
    changed.expect_code(1);
    assert!(
        changed.stderr.contains("the reply text differs at line"),
        "{}",
        changed.stderr
    );
    assert!(
        changed.stderr.contains("finish_nl_script"),
        "{}",
        changed.stderr
    );

    // Malformed cassettes are named as such, with the place.
    let broken = replay(&recorded.replacen("[[event]]", "[[event]", 1));
    broken.expect_code(1);
    assert!(broken.stderr.contains("is malformed"), "{}", broken.stderr);
    assert!(broken.stderr.contains("line"), "{}", broken.stderr);
    let version = replay(&recorded.replace("version = 2", "version = 9"));
    version.expect_code(1);
    assert!(version.stderr.contains("version 9"), "{}", version.stderr);
    let no_reply = replay(&recorded[..recorded.rfind("[[event]]").expect("events")]);
    no_reply.expect_code(1);
    assert!(
        no_reply.stderr.contains("has no reply"),
        "{}",
        no_reply.stderr
    );
    let missing = project.run(&["vcr", "replay", "/no/such/cassette.toml"], "");
    missing.expect_code(1);
    assert!(
        missing.stderr.contains("/no/such/cassette.toml"),
        "{}",
        missing.stderr
    );
}

#[test]
fn committed_cassettes_replay() {
    let mut replayed = 0;
    for name in ["test-random.toml", "test-nested.toml"] {
        let project = Project::new();
        let cassette = cassettes().join(name);
        let run = project.run(&["vcr", "replay", cassette.to_str().expect("utf-8")], "");
        run.expect_code(0);
        assert!(run.stdout.contains("every reply matched"), "{}", run.stdout);
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
