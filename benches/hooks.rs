//! Hook latency, spawn to exit, printed beside its target and its peers.
//!
//! `cargo bench --locked --bench hooks` builds a temporary project with 100 scripts (half of
//! them compiled, in folders), then times whole processes of the release binary, as Claude
//! Code runs them on every prompt:
//!
//! 1. `mekara hook reroute-user-commands` for a typed compiled script (it resolves the name
//!    and answers), for a plain prompt (it says nothing), and `reroute-agent-commands` for a
//!    Skill call;
//! 2. beside them, in the same rounds: `true` (the cost of a spawn itself), and a minimal
//!    Python hook doing the same work (parse the JSON, look for the compiled file, print the
//!    answer): the floor of any hook written in Python, like mekara's predecessor (60–90 ms
//!    per call on this machine).
//!
//! Every figure is the median of [`RUNS`] rounds, taken interleaved so a slow moment of the
//! machine does not land on one figure only.

mod common;

use common::{median, ms, verdict};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Rounds per figure.
const RUNS: usize = 101;
/// Scripts in the project.
const SCRIPTS: usize = 100;
const TARGET_MS: f64 = 3.0;

/// The peer: what a Python hook minimally does for a typed command.
const PYTHON_HOOK: &str = r#"
import json, os, sys
data = json.load(sys.stdin)
prompt = data.get("prompt", "")
if prompt.startswith("/"):
    name = prompt[1:].split(None, 1)[0].replace(":", "/")
    star = os.path.join(data["cwd"], ".mekara", "scripts", "compiled", name + ".star")
    if os.path.isfile(star):
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
              "additionalContext": "call mcp__mekara__start " + json.dumps({"name": name})}}))
"#;

struct Case {
    label: &'static str,
    program: PathBuf,
    args: Vec<String>,
    stdin: String,
    /// Whether it must print an answer (checked once, before timing).
    answers: bool,
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("project");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("mkdir home");
    for i in 0..SCRIPTS {
        let name = format!("group{}/script-{i}", i % 10);
        write(
            &root.join(format!(".mekara/scripts/nl/{name}.md")),
            "Do it.\n",
        );
        if i % 2 == 0 {
            write(
                &root.join(format!(".mekara/scripts/compiled/{name}.star")),
                "def execute(request):\n    auto(\"true\")\n",
            );
        }
    }
    let mekara = PathBuf::from(env!("CARGO_BIN_EXE_mekara"));
    let cwd = root.display().to_string();
    let prompt = |p: &str| serde_json::json!({"prompt": p, "cwd": cwd}).to_string();
    let skill = serde_json::json!({
        "tool_name": "Skill", "tool_input": {"skill": "group4:script-44", "args": "x"}, "cwd": cwd
    })
    .to_string();
    let hook = |name: &str| vec!["hook".to_string(), name.to_string()];
    let mut cases = vec![
        Case {
            label: "mekara, typed compiled script",
            program: mekara.clone(),
            args: hook("reroute-user-commands"),
            stdin: prompt("/group4:script-44 some arguments"),
            answers: true,
        },
        Case {
            label: "mekara, plain prompt",
            program: mekara.clone(),
            args: hook("reroute-user-commands"),
            stdin: prompt("please fix the build"),
            answers: false,
        },
        Case {
            label: "mekara, Skill call",
            program: mekara.clone(),
            args: hook("reroute-agent-commands"),
            stdin: skill,
            answers: true,
        },
        Case {
            label: "peer: `true` (spawn only)",
            program: PathBuf::from("/bin/true"),
            args: Vec::new(),
            stdin: String::new(),
            answers: false,
        },
    ];
    if let Some(python) =
        common::find_in_path(&std::env::var_os("PATH").unwrap_or_default(), "python3")
    {
        cases.push(Case {
            label: "peer: minimal Python hook",
            program: python,
            args: vec!["-c".to_string(), PYTHON_HOOK.to_string()],
            stdin: prompt("/group4:script-44 some arguments"),
            answers: true,
        });
    } else {
        eprintln!("no python3 on PATH: the Python peer is left out");
    }
    for case in &cases {
        let out = run(case, &root, &home);
        assert_eq!(
            !out.is_empty(),
            case.answers,
            "{}: unexpected output {out:?}",
            case.label
        );
    }

    eprintln!("measuring ({RUNS} rounds, {SCRIPTS} scripts in the project)...");
    let mut samples = vec![Vec::new(); cases.len()];
    for _ in 0..RUNS {
        for (case, times) in cases.iter().zip(&mut samples) {
            let start = Instant::now();
            run(case, &root, &home);
            times.push(ms(start.elapsed()));
        }
    }
    println!("hook latency, spawn to exit, median of {RUNS} (target ≤ {TARGET_MS} ms for mekara)");
    for (case, times) in cases.iter().zip(&samples) {
        let m = median(times);
        let check = if case.label.starts_with("mekara") {
            verdict(m, TARGET_MS, "ms", 2)
        } else {
            String::new()
        };
        println!("  {:32} {m:7.2} ms  {check}", case.label);
    }
}

fn run(case: &Case, root: &Path, home: &Path) -> String {
    let mut child = Command::new(&case.program)
        .args(&case.args)
        .current_dir(root)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    // `true` may exit before reading: a broken pipe there is expected.
    let _ = stdin.write_all(case.stdin.as_bytes());
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}
