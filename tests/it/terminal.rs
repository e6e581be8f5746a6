//! `mekara mcp` and `mekara serve` started by hand in a terminal, where a person (not an MCP
//! client) is on stdin: stdin is a pseudo-terminal made by Python's `pty` module (also used by
//! the tests of `mekara run` at a terminal).

use std::path::Path;
use std::process::Command;

use crate::common::{Project, Run, run_with_stdin};

/// Runs the command given after the text to type with stdin on a new pseudo-terminal, types
/// that text (Ctrl-D, `\x04`, ends the input as a person ends it), and exits with the
/// command's code; stdout and stderr are the caller's. The wait has a limit only so that a
/// command that never ends fails instead of hanging.
const ON_A_TERMINAL: &str = r#"
import os, pty, subprocess, sys
master, slave = pty.openpty()
child = subprocess.Popen(sys.argv[2:], stdin=slave)
os.close(slave)
os.write(master, sys.argv[1].encode())
try:
    sys.exit(child.wait(timeout=120))
except subprocess.TimeoutExpired:
    child.kill()
    sys.exit("the server did not end at Ctrl-D")
"#;

/// `cmd` (a `mekara` command from [`Project::command`]) run with a terminal on stdin, where
/// nobody types but Ctrl-D.
fn on_a_terminal(cmd: &Command) -> Run {
    typed_on_a_terminal(cmd, "\x04")
}

/// `cmd` run with a terminal on stdin, where a person types `typed`.
pub(crate) fn typed_on_a_terminal(cmd: &Command, typed: &str) -> Run {
    let mut python = Command::new("python3");
    python
        .arg("-c")
        .arg(ON_A_TERMINAL)
        .arg(typed)
        .arg(cmd.get_program());
    python.args(cmd.get_args()).env_clear();
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            python.env(key, value);
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        python.current_dir(dir);
    }
    let out = python
        .output()
        .expect("python3 runs (it is needed for the pty)");
    Run::from_output(out)
}

fn examples() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/tools")
        .display()
        .to_string()
}

/// Regression: `mekara mcp` typed in a terminal printed nothing and seemed to hang. It now
/// says on stderr what it waits for and how to try it; stdout stays the protocol's.
#[test]
fn mcp_in_a_terminal_says_it_waits_for_a_client() {
    let project = Project::new();
    let run = on_a_terminal(&project.command(&["mcp"]));
    mekara_snapshot!(project, run);
}

/// Regression: the same for `mekara serve`.
#[test]
fn serve_in_a_terminal_says_it_waits_for_a_client() {
    let project = Project::new();
    let run = on_a_terminal(&project.command(&["serve", &examples()]));
    mekara_snapshot!(project, run);
}

/// An MCP client's pipe on stdin gets nothing but the protocol: the answer to `initialize`
/// on stdout, not a word on stderr.
#[test]
fn piped_servers_say_nothing_but_the_protocol() {
    let project = Project::new();
    let session = format!(
        "{}\n{}\n",
        crate::mcp_protocol::INIT,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    );
    for args in [vec!["mcp"], vec!["serve", &examples()]] {
        let run = run_with_stdin(project.command(&args), &session);
        run.expect_code(0);
        let lines: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", run.stdout);
        let answer: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON-RPC");
        assert_eq!(answer["id"], 0, "{args:?}: {answer}");
        assert_eq!(run.stderr, "", "{args:?}");
    }
}
