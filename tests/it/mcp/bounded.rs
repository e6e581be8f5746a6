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

/// The case's project with a small `package-lock.json` committed and then, uncommitted,
/// grown to [`LOCK_LINES`] lines: what an upgrade of the dependencies leaves.
fn with_a_big_lock_change(case: Case) -> Case {
    case.project.write("package-lock.json", "{}\n");
    // Only the lock file: the case's own change stays uncommitted.
    library::git(&case.project, &["add", "package-lock.json"]);
    library::git(
        &case.project,
        &["commit", "-q", "-m", "Lock the JavaScript dependencies"],
    );
    case.project
        .write("package-lock.json", &library::package_lock(LOCK_LINES));
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
        assert_eq!(
            std::fs::read_to_string(case.project.root().join("package-lock.json"))
                .expect("lock")
                .lines()
                .count(),
            LOCK_LINES
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
