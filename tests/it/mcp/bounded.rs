//! Every reply stays small enough for an agent to read whole: each workflow of the library
//! (`flow/*`) played over MCP on a change with a 30,000-line lock file.

use super::vcr::{play, start_case};
use crate::library::{self, Case};

/// The most bytes one reply may have: Claude Code cuts a tool result at 25,000 tokens.
const MAX_REPLY: usize = 80 * 1024;

/// The lines of the lock file the change adds.
const LOCK_LINES: usize = 30_000;

/// The pending items each workflow is played for: its first few llm steps and questions.
const TURNS: usize = 4;

/// The case's project with its ecosystem's lock file grown by [`LOCK_LINES`] lines,
/// uncommitted, beside the case's own change: what an upgrade of the dependencies leaves. A
/// Rust project's `Cargo.lock` gets packages nothing uses (cargo drops them), a Python
/// project's `uv.lock` is new, a JavaScript project's `package-lock.json` was `{}`.
fn with_a_big_lock_change(case: Case) -> Case {
    let root = case.project.root();
    let rows = |row: &dyn Fn(usize) -> String| (0..LOCK_LINES / 5).map(row).collect::<String>();
    let (file, before, grown) = if root.join("Cargo.toml").exists() {
        let lock = std::fs::read_to_string(root.join("Cargo.lock")).expect("Cargo.lock");
        let unused = rows(&|n| {
            format!(
                "\n[[package]]\nname = \"unused-{n}\"\nversion = \"1.0.{n}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
            )
        });
        ("Cargo.lock", lock.clone(), lock + &unused)
    } else if root.join("pyproject.toml").exists() {
        let head = "version = 1\nrequires-python = \">=3.9\"\n".to_string();
        let packages = rows(&|n| {
            format!(
                "\n[[package]]\nname = \"dep-{n}\"\nversion = \"1.0.{n}\"\nsource = {{ registry = \"https://pypi.org/simple\" }}\n"
            )
        });
        ("uv.lock", head.clone(), head + &packages)
    } else {
        (
            "package-lock.json",
            "{}\n".to_string(),
            library::package_lock(LOCK_LINES),
        )
    };
    case.project.write(file, &before);
    // Only the lock file: the case's own change stays uncommitted.
    library::git(&case.project, &["add", file]);
    library::git(
        &case.project,
        &[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "Lock the dependencies",
        ],
    );
    case.project.write(file, &grown);
    case
}

/// Regression (issue 39): `flow/test-gaps` echoed its function steps' whole arguments (the
/// diff with the lock file) in its first reply, 297 KB on a real project.
#[tokio::test]
async fn no_reply_of_a_workflow_passes_80_kb_on_a_change_with_a_big_lock_file() {
    let cases = [
        library::commit,
        library::pr,
        library::review,
        library::fix_ci,
        library::release,
        library::upgrade_deps,
        library::docs_sync,
        library::triage,
        library::test_gaps,
        library::bisect,
    ];
    let mut too_big = Vec::new();
    let mut reached = Vec::new();
    let mut stopped = Vec::new();
    for case in cases {
        let case = with_a_big_lock_change(case());
        let added = library::git(&case.project, &["diff", "--numstat"]);
        assert!(
            added
                .lines()
                .any(|l| l.starts_with(&LOCK_LINES.to_string()))
                || case.project.root().join("uv.lock").exists(),
            "{}: {added}",
            case.name
        );
        let client = start_case(&case, None).await;
        let played = play(&case, &client, TURNS).await;
        client.service.cancel().await.expect("close");
        for (call, reply) in played.replies.iter().enumerate() {
            if reply.text.len() > MAX_REPLY {
                too_big.push(format!(
                    "{} reply {call}: {} bytes, starting {}",
                    case.name,
                    reply.text.len(),
                    reply.text.chars().take(300).collect::<String>()
                ));
            }
        }
        if played
            .replies
            .iter()
            .any(|r| r.text.contains("## Your turn: llm step"))
        {
            reached.push(case.name);
        } else {
            let last = played.replies.last().map_or("", |r| r.text.as_str());
            stopped.push(format!(
                "{}: {}",
                case.name,
                &last[last.len().saturating_sub(1500)..]
            ));
        }
    }
    assert!(too_big.is_empty(), "{}", too_big.join("\n\n"));
    // Played far enough to matter: the workflows that read the whole change got to the agent.
    for name in ["flow/review", "flow/test-gaps", "flow/commit"] {
        assert!(
            reached.contains(&name),
            "{name} never reached an llm step:\n{}",
            stopped.join("\n\n")
        );
    }
}
