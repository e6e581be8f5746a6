//! Auto shell steps, driven through `mekara run` on compiled project scripts: the output a
//! step records and streams, exit codes and failures, timeouts, the process group that is
//! killed when a step ends, and the folder, environment and stdin a command gets.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{Project, Run};
use serde_json::Value as Json;

/// How long any wait in these tests may last before the test fails instead of hanging.
const BOUND: Duration = Duration::from_secs(20);

/// How long a killed process may take to disappear. Far shorter than the `sleep 30` the
/// tests leave behind, so a process that was not killed is caught.
const REAP_BOUND: Duration = Duration::from_secs(5);

/// NL instructions of the test scripts, shown when a script falls back.
const NL: &str = "Do the step by hand.\n";

/// The `result` of every step event of the project's only run, in journal order.
fn step_results(project: &Project) -> Vec<Json> {
    let ids = project.run_ids();
    assert_eq!(ids.len(), 1, "expected exactly one run, found {ids:?}");
    project
        .journal(&ids[0])
        .lines()
        .map(|line| serde_json::from_str::<Json>(line).expect("a journal line is JSON"))
        .filter(|event| event["event"] == "step")
        .map(|event| event["result"].clone())
        .collect()
}

/// The only step result of the project's only run.
fn only_step(project: &Project) -> Json {
    let mut results = step_results(project);
    assert_eq!(results.len(), 1, "expected one step, found {results:?}");
    results.remove(0)
}

fn output_of(result: &Json) -> &str {
    result["output"].as_str().unwrap_or("")
}

fn error_of(result: &Json) -> &str {
    result["error"].as_str().unwrap_or("")
}

/// Writes `stdin_text` to `child`, waits for it to exit, and kills it (failing the
/// test) if it takes longer than [`BOUND`]. Stdin is closed only once it exits, so a command
/// that wrongly read mekara's stdin would block instead of seeing end of input.
fn wait_bounded(mut child: Child, stdin_text: &str) -> Run {
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(stdin_text.as_bytes()).expect("write stdin");
    // The caller may have taken stdout to read it live.
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let deadline = Instant::now() + BOUND;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mekara did not finish within {BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(stdin);
    Run {
        code: status.code(),
        stdout: stdout
            .map(|r| r.join().expect("stdout reader"))
            .unwrap_or_default(),
        stderr: stderr
            .map(|r| r.join().expect("stderr reader"))
            .unwrap_or_default(),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Whether process `pid` still runs. A killed process whose parent is gone is reaped by
/// init (or a subreaper); until then it is a zombie, which no longer runs, so it counts as
/// gone too: some container inits never reap orphans.
fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        // The state is the first field after the `(comm)` one, which may hold spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
    }
}

/// Asserts that the process whose pid a step wrote to `file` (under the project root) is
/// gone, allowing a bounded moment for the kernel to finish it.
fn assert_gone(project: &Project, file: &str) {
    let text =
        std::fs::read_to_string(project.root().join(file)).expect("the step wrote the pid file");
    let pid: u32 = text.trim().parse().expect("a pid");
    let deadline = Instant::now() + REAP_BOUND;
    while is_running(pid) {
        assert!(
            Instant::now() < deadline,
            "process {pid} (from `{file}`) still runs after the step ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path)
        .expect("canonicalize")
        .display()
        .to_string()
}

/// `.ci/run` runs these tests a second time with `MEKARA_PROCESS_BACKEND=portable`: the
/// variable reaches the mekara under test, and the backend it names is the one that runs.
#[cfg(target_os = "linux")]
#[test]
fn the_process_backend_the_environment_names_is_the_one_that_runs() {
    let project = Project::new();
    project.script(
        "one",
        NL,
        Some("def execute(request):\n    auto(\"true\")\n"),
    );
    let mut command = project.command(&["run", "one"]);
    command.env("MEKARA_LOG", "mekara=debug");
    let run = crate::common::run_with_stdin(command, "");
    run.expect_code(0);
    let named = std::env::var("MEKARA_PROCESS_BACKEND").ok();
    let expected = if named.as_deref() == Some("portable") {
        "portable"
    } else {
        "linux"
    };
    let said: Vec<&str> = run
        .stderr
        .lines()
        .filter_map(|line| line.split_once("process backend: ").map(|(_, name)| name))
        .collect();
    assert_eq!(said, [expected], "{}", run.stderr);
}

#[test]
fn stdout_and_stderr_are_recorded_interleaved_in_the_order_written() {
    let project = Project::new();
    project.script(
        "order",
        NL,
        Some("def execute(request):\n    auto(\"echo a; echo b >&2; echo c; echo d >&2\")\n"),
    );
    project.run(&["run", "order"], "").expect_code(0);
    assert_eq!(output_of(&only_step(&project)), "a\nb\nc\nd\n");
}

#[test]
fn allowed_failure_gives_the_script_the_failure_and_exit_code() {
    let project = Project::new();
    project.script(
        "code",
        NL,
        Some(concat!(
            "def execute(request):\n",
            "    r = auto(\"exit 3\", allow_failure = True)\n",
            "    llm(\"success=%s code=%d\" % (r.success, r.exit_code))\n",
        )),
    );
    mekara_snapshot!(project, project.run(&["run", "code"], "\n"));
}

#[test]
fn failed_step_without_allow_failure_falls_back_to_the_instructions() {
    let project = Project::new();
    project.script(
        "fails",
        NL,
        Some("def execute(request):\n    auto(\"exit 3\")\n    llm(\"not reached\")\n"),
    );
    // The snapshot pins what failed and the instructions shown for the fallback.
    let run = mekara_snapshot!(project, project.run(&["run", "fails"], "done\n"));
    assert!(!run.stdout.contains("not reached"), "{}", run.stdout);
    let step = only_step(&project);
    assert_eq!(
        (step["success"].as_bool(), step["exit_code"].as_i64()),
        (Some(false), Some(3))
    );
    assert_eq!(error_of(&step), "exited with code 3");
}

#[test]
fn step_timeout_kills_the_command_and_what_it_started() {
    let project = Project::new();
    project.script(
        "slow",
        NL,
        Some(concat!(
            "def execute(request):\n",
            "    r = auto(\"sleep 30 & echo $! > bg.pid; sleep 30\", timeout = 1, allow_failure = True)\n",
            "    llm(\"success=%s error=%s\" % (r.success, r.error))\n",
        )),
    );
    let run = wait_bounded(project.spawn(&["run", "slow"]), "\n");
    run.expect_code(0);
    let error = "timed out after 1s; the command's process group was killed (a process it moved out of the group, with `setsid` or as a daemon, is not)";
    assert!(
        run.stdout
            .contains(&format!("\nsuccess=False error={error}\n")),
        "{}",
        run.stdout
    );
    assert_eq!(error_of(&step_results(&project)[0]), error);
    assert_gone(&project, "bg.pid");
}

#[test]
fn a_timeout_says_when_a_process_outside_the_group_survived() {
    // Regression: the message said everything the command started was killed while a
    // `setsid` child lived on.
    let project = Project::new();
    project.script(
        "slow",
        NL,
        Some(concat!(
            "def execute(request):\n",
            "    r = auto(\"setsid sleep 30 & echo $! > away.pid; sleep 30\", timeout = 1, allow_failure = True)\n",
            "    llm(\"error=%s\" % r.error)\n",
        )),
    );
    let run = wait_bounded(project.spawn(&["run", "slow"]), "\n");
    let away: u32 = std::fs::read_to_string(project.root().join("away.pid"))
        .expect("the step wrote the pid file")
        .trim()
        .parse()
        .expect("a pid");
    let survived = is_running(away);
    let _ = std::process::Command::new("kill")
        .args(["-9", &away.to_string()])
        .status();
    run.expect_code(0);
    assert!(
        survived,
        "the `setsid` process was expected to outlive the group"
    );
    let error = error_of(&step_results(&project)[0]).to_string();
    insta::assert_snapshot!(error);
}

#[test]
fn run_timeout_flag_applies_to_steps_without_their_own() {
    let project = Project::new();
    project.script(
        "slow",
        NL,
        Some(concat!(
            "def execute(request):\n",
            "    auto(\"sleep 0.5\", timeout = 30)\n",
            "    auto(\"sleep 30\", allow_failure = True)\n",
        )),
    );
    let run = wait_bounded(project.spawn(&["run", "--timeout", "0.2", "slow"]), "");
    run.expect_code(0);
    let results = step_results(&project);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(
        results[0]["success"].as_bool(),
        Some(true),
        "its own timeout wins: {:?}",
        results[0]
    );
    assert_eq!(
        error_of(&results[1]),
        "timed out after 200ms; the command's process group was killed (a process it moved out of the group, with `setsid` or as a daemon, is not)"
    );
}

#[test]
fn background_process_of_a_finished_command_is_killed_with_it() {
    let project = Project::new();
    project.script(
        "bg",
        NL,
        Some("def execute(request):\n    auto(\"sleep 30 & echo $! > bg.pid\")\n"),
    );
    // Bounded: a step that waited for the background `sleep` would take 30 s.
    wait_bounded(project.spawn(&["run", "bg"]), "").expect_code(0);
    let step = only_step(&project);
    assert_eq!(
        (step["success"].as_bool(), step["exit_code"].as_i64()),
        (Some(true), Some(0))
    );
    assert_gone(&project, "bg.pid");
}

#[test]
fn large_output_is_recorded_completely() {
    let project = Project::new();
    project.script(
        "big",
        NL,
        Some("def execute(request):\n    auto(\"seq 1 200000\")\n"),
    );
    project.run(&["run", "big"], "").expect_code(0);
    let step = only_step(&project);
    let output = output_of(&step);
    let expected: String = (1..=200_000)
        .flat_map(|n| [n.to_string(), "\n".into()])
        .collect();
    assert_eq!(output.lines().last(), Some("200000"));
    assert_eq!(output.len(), expected.len());
    assert!(
        output == expected,
        "the recorded output differs from `seq 1 200000`"
    );
}

#[test]
fn working_dir_is_relative_to_the_folder_the_script_runs_in() {
    let project = Project::new();
    std::fs::create_dir_all(project.root().join("sub/inner")).expect("mkdir");
    project.script(
        "where",
        NL,
        Some("def execute(request):\n    auto(\"pwd -P\", working_dir = \"inner\")\n"),
    );
    project
        .run(&["run", "-C", "sub", "where"], "")
        .expect_code(0);
    let expected = format!("{}\n", canonical(&project.root().join("sub/inner")));
    assert_eq!(output_of(&only_step(&project)), expected);
}

#[test]
fn working_dir_may_be_absolute() {
    let project = Project::new();
    let elsewhere = project.home();
    project.script(
        "where",
        NL,
        Some(&format!(
            "def execute(request):\n    auto(\"pwd -P\", working_dir = {:?})\n",
            elsewhere.display().to_string()
        )),
    );
    project.run(&["run", "where"], "").expect_code(0);
    assert_eq!(
        output_of(&only_step(&project)),
        format!("{}\n", canonical(&elsewhere))
    );
}

#[test]
fn env_sets_variables_of_the_command() {
    let project = Project::new();
    project.script(
        "env",
        NL,
        Some("def execute(request):\n    auto(\"echo \\\"$FOO\\\"\", env = {\"FOO\": \"bar\"})\n"),
    );
    project.run(&["run", "env"], "").expect_code(0);
    assert_eq!(output_of(&only_step(&project)), "bar\n");
}

#[test]
fn stdin_of_a_command_is_dev_null() {
    let project = Project::new();
    project.script(
        "cat",
        NL,
        Some("def execute(request):\n    auto(\"cat\")\n"),
    );
    // mekara's own stdin stays open with text in it: a `cat` that read it would print the
    // text and then block, and the bounded wait would fail the test.
    let run = wait_bounded(project.spawn(&["run", "cat"]), "not for cat\n");
    run.expect_code(0);
    let step = only_step(&project);
    assert_eq!(step["success"].as_bool(), Some(true));
    assert_eq!(output_of(&step), "");
}

#[test]
fn missing_working_dir_fails_with_a_message_naming_it() {
    let project = Project::new();
    project.script(
        "nowhere",
        NL,
        Some("def execute(request):\n    auto(\"true\", working_dir = \"missing\")\n"),
    );
    let run = project.run(&["run", "nowhere"], "\n");
    run.expect_code(1);
    let error = format!(
        "working_dir `{}` is not a folder",
        project.root().join("missing").display()
    );
    assert!(
        run.stdout.contains(&format!(
            "What failed:\nstep nowhere[0] `$ true` failed: {error}\n"
        )),
        "{}",
        run.stdout
    );
    assert_eq!(error_of(&only_step(&project)), error);
}

/// The lines of a running mekara's stdout, read on a thread as they come.
struct LiveLines {
    seen: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

impl LiveLines {
    fn read(child: &mut Child) -> LiveLines {
        let stdout = child.stdout.take().expect("stdout");
        let (lines, seen) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        LiveLines { seen, reader }
    }

    /// The lines up to the first that `wanted` accepts. When none comes within [`BOUND`],
    /// the step is let end (`go` is written) and mekara killed before failing, so no shell
    /// loop is left behind.
    fn until(&self, wanted: impl Fn(&str) -> bool, go: &Path, child: &mut Child) -> Vec<String> {
        let deadline = Instant::now() + BOUND;
        let mut shown: Vec<String> = Vec::new();
        while !shown.last().is_some_and(|l| wanted(l)) {
            if let Ok(line) = self
                .seen
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                shown.push(line);
            } else {
                std::fs::write(go, "").expect("write go");
                let _ = child.kill();
                panic!("the line looked for did not come within {BOUND:?}; saw {shown:?}");
            }
        }
        shown
    }

    /// The lines after those [`LiveLines::until`] returned, once mekara has ended.
    fn rest(self) -> Vec<String> {
        self.reader.join().expect("stdout reader");
        self.seen.try_iter().collect()
    }
}

/// A step's closing line waits to leave with the next step's header (one write), but never
/// longer: while the second step runs, the first one's `✓` line is on screen.
#[test]
fn a_finished_step_is_shown_before_the_next_one_runs() {
    let project = Project::new();
    project.script(
        "two",
        NL,
        Some(concat!(
            "def execute(request):\n",
            "    auto(\"true\")\n",
            "    auto(\"while [ ! -e go ]; do sleep 0.05; done\")\n",
        )),
    );
    let go = project.root().join("go");
    let mut child = project.spawn(&["run", "two"]);
    let live = LiveLines::read(&mut child);
    let shown = live.until(|l| l.starts_with("▶ two[1]"), &go, &mut child);
    // The second step is still waiting for `go`, and the first one's end is already shown,
    // before the second one's header.
    let finished = shown.iter().position(|l| l.starts_with("✓ two[0]"));
    let second = shown.iter().position(|l| l.starts_with("▶ two[1]"));
    assert!(finished.is_some() && finished < second, "{shown:?}");
    std::fs::write(&go, "").expect("write go");
    let run = wait_bounded(child, "");
    let rest = live.rest();
    run.expect_code(0);
    assert!(rest.iter().any(|l| l.starts_with("✓ two[1]")), "{rest:?}");
}

#[test]
fn output_streams_live_while_the_step_runs() {
    let project = Project::new();
    project.script(
        "live",
        NL,
        Some(concat!(
            "def execute(request):\n",
            "    auto(\"echo first; while [ ! -e go ]; do sleep 0.05; done; echo second\")\n",
        )),
    );
    let go = project.root().join("go");
    let mut child = project.spawn(&["run", "live"]);
    let live = LiveLines::read(&mut child);
    // Step output is printed under the step, behind a bar; the step's own line (`▶ ...`)
    // names both words too, so only the bar lines count.
    let before_go = live.until(|l| l == "  │ first", &go, &mut child);
    assert!(
        !before_go.iter().any(|l| l == "  │ second"),
        "{before_go:?}"
    );
    std::fs::write(&go, "").expect("write go");
    let run = wait_bounded(child, "");
    let after_go = live.rest();
    run.expect_code(0);
    assert!(after_go.iter().any(|l| l == "  │ second"), "{after_go:?}");
    assert_eq!(output_of(&only_step(&project)), "first\nsecond\n");
}

/// mekara reads clocks through libc, so it runs under valgrind (which gives a process no
/// vDSO of its own; reading the vDSO by hand, as rustix does, crashed there). Run and
/// resume both, since a resume reads the process table's clock too.
#[test]
fn a_run_and_its_resume_work_under_valgrind() {
    let project = Project::new();
    project.script(
        "under_valgrind",
        NL,
        Some("def execute(request):\n    print(auto(\"echo from-the-shell\").output)\n    llm(\"then this\")\n"),
    );
    let under_valgrind = |args: &[&str], stdin: &str| {
        let mekara = project.command(args);
        let mut cmd = std::process::Command::new("valgrind");
        cmd.args(["--tool=none", "--quiet"])
            .arg(mekara.get_program())
            .args(mekara.get_args())
            .current_dir(project.root())
            .env_clear();
        for (key, value) in mekara.get_envs() {
            if let Some(value) = value {
                cmd.env(key, value);
            }
        }
        crate::common::run_with_stdin(cmd, stdin)
    };
    let first = under_valgrind(&["run", "under_valgrind"], "");
    assert!(
        first.stdout.contains("from-the-shell"),
        "the shell step ran under valgrind: {}\n{}",
        first.stdout,
        first.stderr
    );
    let id = project.run_ids().pop().expect("a run was started");
    under_valgrind(&["run", "--resume", &id], "\n").expect_code(0);
}

/// A step that calls `mekara` (as `/compile`'s do) finds the mekara running it although that
/// one was started by its path and `PATH` has none (a plugin, `npx`, a wheel's virtualenv):
/// `MEKARA` names it, and `PATH` starts with a folder that holds only a link to it, so the
/// binary's own folder (a virtualenv's `python` beside it) takes nothing else's place.
#[test]
fn a_step_finds_the_running_mekara_when_path_has_none() {
    let project = Project::new();
    project.script(
        "which",
        NL,
        Some(
            "def execute(request):\n    \
             auto(\"echo \\\"MEKARA=$MEKARA\\\"; command -v mekara; ls \\\"$(dirname \\\"$(command -v mekara)\\\")\\\"; mekara --version; echo \\\"PATH=$PATH\\\"\")\n",
        ),
    );
    let exe = Path::new(env!("CARGO_BIN_EXE_mekara"));
    let run = project
        .command(&["run", "which"])
        .env("PATH", "/usr/bin:/bin")
        .output();
    let out = String::from_utf8_lossy(&run.as_ref().expect("run").stdout).into_owned();
    assert!(run.expect("run").status.success(), "{out}");
    assert!(out.contains(&format!("MEKARA={}", exe.display())), "{out}");
    let link_folder = project.home().join(".cache/mekara/path");
    assert!(
        out.contains(&link_folder.display().to_string()),
        "`mekara` is not the link under `{}`:\n{out}",
        link_folder.display()
    );
    assert!(
        out.contains(&format!("mekara {}", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    assert!(
        out.contains(":/usr/bin:/bin\n"),
        "the rest of PATH is kept:\n{out}"
    );
    let linked: Vec<_> = std::fs::read_dir(&link_folder)
        .expect("the link folder")
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).expect("a folder").flatten())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(linked, ["mekara"], "the folder holds the link only");
}

/// When the `mekara` on `PATH` is the one running, a step's `PATH` is left as it was.
#[test]
fn a_step_keeps_path_when_it_finds_the_running_mekara_there() {
    let project = Project::new();
    project.script(
        "path",
        NL,
        Some("def execute(request):\n    auto(\"echo \\\"PATH=$PATH\\\"\")\n"),
    );
    let path = crate::common::path_with_mekara();
    let run = project
        .command(&["run", "path"])
        .env("PATH", &path)
        .output()
        .expect("run");
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{out}");
    assert!(out.contains(&format!("PATH={path}\n")), "{out}");
}

#[test]
fn a_step_naming_cmd_or_a_missing_pwsh_fails_on_unix_saying_what_to_install() {
    let project = Project::new();
    project.script(
        "shells",
        NL,
        Some(concat!(
            "def execute(request):\n",
            "    c = auto(\"dir\", shell = \"cmd\", allow_failure = True)\n",
            "    p = auto(\"Get-ChildItem\", shell = \"pwsh\", allow_failure = True)\n",
            "    b = auto(\"echo by-bash\", shell = \"bash\")\n",
            "    llm(\"cmd: %s\\npwsh: %s\\nbash: %s\" % (c.error, p.error, b.output.strip()))\n",
        )),
    );
    // `pwsh` is looked for on `PATH`: one without it, where bash and echo still are.
    let bin = tempfile::tempdir().expect("tempdir");
    for tool in ["bash", "echo"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(tool))
            .find(|p| p.exists())
            .expect("the tool is installed");
        std::os::unix::fs::symlink(found, bin.path().join(tool)).expect("link");
    }
    let mut command = project.command(&["run", "shells"]);
    command.env("PATH", bin.path());
    let run = crate::common::run_with_stdin(command, "\n");
    run.expect_code(0);
    let shown = run
        .stdout
        .split("── llm step shells[3] ──\n")
        .nth(1)
        .expect("the llm step is shown");
    insta::assert_snapshot!(shown.lines().take(3).collect::<Vec<_>>().join("\n"));
    // The shell a step names is part of what the journal records of it.
    let journal = project.journal(&project.run_ids()[0]);
    assert!(journal.contains(r#""shell":"cmd""#), "{journal}");
    assert!(!journal.contains(r#""shell":"bash""#), "{journal}");
}

#[test]
fn a_shell_mekara_does_not_know_is_an_error_naming_the_ones_it_does() {
    let project = Project::new();
    project.script(
        "zsh",
        NL,
        Some("def execute(request):\n    auto(\"echo hi\", shell = \"zsh\")\n"),
    );
    let run = project.run(&["run", "zsh"], "\n");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains(
            "`shell` is `zsh`, which mekara does not know; use one of `\"bash\"`, `\"pwsh\"`, `\"cmd\"`"
        ),
        "{said}"
    );
}
