//! The shared test context: a temporary project ([`Project`]) with a hermetic environment
//! (its own HOME, no colour, fixed width), the real binary, the one [`Project::scrub`] that
//! makes output comparable (paths, run ids, times, versions), and [`mekara_snapshot!`],
//! which pins a command's exit code, stdout and stderr together.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// A temporary project (`<tmp>/project` with `.mekara/`) and a separate home folder.
pub struct Project {
    pub dir: tempfile::TempDir,
}

impl Project {
    /// A project with an empty `.mekara/`.
    pub fn new() -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("project/.mekara")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join("home")).expect("mkdir");
        Project { dir }
    }

    /// The project root.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// The fake home folder.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// Writes `text` to `path` under the project root, creating folders. A `.mcp.json` is
    /// written as a person who approved its servers in Claude Code has it: with
    /// `enableAllProjectMcpServers` in `.claude/settings.local.json` (mekara contacts no
    /// server of the project's `.mcp.json` without; `mcp_client` tests that).
    pub fn write(&self, path: &str, text: &str) -> PathBuf {
        if path == ".mcp.json" {
            write_file(
                &self.root().join(".claude/settings.local.json"),
                r#"{"enableAllProjectMcpServers": true}"#,
            );
        }
        write_file(&self.root().join(path), text)
    }

    /// Writes a project script: `.mekara/scripts/nl/<name>.md`, and the compiled file when
    /// `star` is given.
    pub fn script(&self, name: &str, nl: &str, star: Option<&str>) {
        self.write(&format!(".mekara/scripts/nl/{name}.md"), nl);
        if let Some(star) = star {
            self.write(&format!(".mekara/scripts/compiled/{name}.star"), star);
        }
    }

    /// `mekara ARGS` in the project root, with a hermetic environment.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_in(&self.root(), args)
    }

    /// `mekara ARGS` in `dir`.
    /// An outside client `program` started as a person starts it in the project: in its
    /// folder, with nothing of the test's environment but mekara on the `PATH`, the test's
    /// `HOME`, and mekara's log in that home.
    pub fn client_command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.root())
            .env_clear()
            .env("PATH", path_with_mekara())
            .env("HOME", self.home())
            .env("MEKARA_LOG_FILE", self.home().join("mekara.log"));
        with_process_backend(&mut command);
        command
    }

    pub fn command_in(&self, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mekara"));
        cmd.args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("NO_COLOR", "1")
            .env("COLUMNS", "100")
            .env("LANG", "C.UTF-8");
        with_process_backend(&mut cmd);
        cmd
    }

    /// A command line typed in the project root (`sh -c LINE`), with the `mekara` under test
    /// first on `PATH` and the same hermetic environment as [`Project::command`].
    pub fn shell(&self, line: &str) -> Command {
        let hermetic = self.command(&[]);
        let mut shell = Command::new("/bin/sh");
        shell
            .arg("-c")
            .arg(line)
            .current_dir(self.root())
            .env_clear();
        for (key, value) in hermetic.get_envs() {
            if let Some(value) = value {
                shell.env(key, value);
            }
        }
        shell.env("PATH", path_with_mekara());
        shell
    }

    /// Runs `mekara ARGS` with `stdin` piped in, and waits.
    pub fn run(&self, args: &[&str], stdin: &str) -> Run {
        run_with_stdin(self.command(args), stdin)
    }

    /// Spawns `mekara ARGS` with piped stdin and stdout, without waiting.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mekara")
    }

    /// The ids of the project's runs, oldest first.
    pub fn run_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(self.root().join(".mekara/runs"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()?
                            .strip_suffix(".jsonl")
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Ids begin with the second they were made in and end with random letters: two runs
        // started in one second are ordered by the time their journals record (milliseconds).
        let started = |id: &String| {
            let journal =
                std::fs::read_to_string(self.root().join(format!(".mekara/runs/{id}.jsonl")))
                    .unwrap_or_default();
            let first = journal.lines().next().unwrap_or_default();
            serde_json::from_str::<serde_json::Value>(first)
                .ok()
                .and_then(|e| e["at"].as_u64())
                .unwrap_or(0)
        };
        ids.sort_by_cached_key(|id| (id[..id.len().min(15)].to_string(), started(id), id.clone()));
        ids
    }

    /// `text` with what changes between runs and machines written as placeholders: the
    /// project as `[PROJECT]`, the home folder as `[HOME]`, the rest of the temporary folder
    /// as `[TMP]`, the repository as `[REPO]` (each as given and canonicalized), mekara's
    /// version as `[VERSION]`, and run ids, run tokens, times and durations as [`redact`]
    /// writes them.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf();
        // Inner folders first: the project and home are inside the temporary folder.
        for (path, name) in [
            (self.root(), "[PROJECT]"),
            (self.home(), "[HOME]"),
            (self.dir.path().to_path_buf(), "[TMP]"),
            (repo, "[REPO]"),
        ] {
            if let Ok(real) = path.canonicalize() {
                text = text.replace(&real.display().to_string(), name);
            }
            text = text.replace(&path.display().to_string(), name);
        }
        let version = env!("CARGO_PKG_VERSION");
        text = text.replace(&format!("mekara {version}"), "mekara [VERSION]");
        redact(&text)
    }

    /// What a user saw of `run`: its exit code, stdout and stderr, scrubbed.
    pub fn transcript(&self, run: &Run) -> String {
        let code = run
            .code
            .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
        format!(
            "exit code: {code}\n----- stdout -----\n{}----- stderr -----\n{}",
            self.scrub(&run.stdout),
            self.scrub(&run.stderr)
        )
    }

    /// What a user saw of each of `commands` (`mekara` arguments, run in turn with nothing
    /// on stdin), each headed by the line typed: one snapshot pins the same mistake made
    /// several ways.
    pub fn session(&self, commands: &[&[&str]]) -> String {
        commands
            .iter()
            .map(|args| {
                let run = self.run(args, "");
                format!("$ mekara {}\n{}", args.join(" "), self.transcript(&run))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Every file of the project's run store (journals, locks, notes), by name, byte for
    /// byte: compare two to show that a call changed nothing.
    pub fn runs_snapshot(&self) -> std::collections::BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(self.root().join(".mekara/runs"))
            .map(|d| {
                d.flatten()
                    .map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        (name, std::fs::read(e.path()).unwrap_or_default())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The journal text of run `id`.
    pub fn journal(&self, id: &str) -> String {
        std::fs::read_to_string(self.root().join(format!(".mekara/runs/{id}.jsonl")))
            .expect("journal")
    }

    /// Run `id`'s journal without its header line, whose random handle digest (hex) can hold
    /// any short string a test looks for.
    pub fn journal_events_text(&self, id: &str) -> String {
        let journal = self.journal(id);
        journal
            .split_once('\n')
            .map_or(String::new(), |(_, rest)| rest.to_string())
    }
}

/// `mekara ARGS` in the project root under `strace -f -qq STRACE -o FILE`, with the
/// hermetic environment of [`Project::command`] and nothing on stdin: how it ran, and what
/// strace wrote.
pub fn under_strace(project: &Project, strace: &[&str], args: &[&str]) -> (Run, String) {
    let trace = project.dir.path().join("strace.out");
    let mekara = project.command(args);
    let mut command = Command::new("strace");
    command
        .args(["-f", "-qq"])
        .args(strace)
        .arg("-o")
        .arg(&trace)
        .arg(mekara.get_program())
        .args(mekara.get_args())
        .current_dir(project.root())
        .env_clear()
        .envs(mekara.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let run = run_with_stdin(command, "");
    let traced = std::fs::read_to_string(&trace).unwrap_or_default();
    (run, traced)
}

/// The process backend the test's environment names (`.ci/run` runs the step, durability and
/// MCP tests a second time with `MEKARA_PROCESS_BACKEND=portable`), kept in the hermetic
/// environment of the mekara under test.
fn with_process_backend(command: &mut Command) {
    if let Some(backend) = std::env::var_os("MEKARA_PROCESS_BACKEND") {
        command.env("MEKARA_PROCESS_BACKEND", backend);
    }
}

/// `PATH` with the folder of the `mekara` under test first: a shell, or an agent client
/// running `mekara mcp` and the hooks by that name as `mekara install` registers them, finds
/// this build.
pub fn path_with_mekara() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_mekara"))
        .parent()
        .expect("the binary has a folder");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// How many lines the file at `path` has (0 when it is not there): how often a step that
/// appends a line to it ran.
pub fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Waits up to 20 s for `path` to appear (a step says it started by creating it).
pub fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

pub fn write_file(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    path.to_path_buf()
}

/// What a finished `mekara` process printed.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from_output(out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Panics with both streams unless the exit code is `code`.
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code,
            Some(code),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// What [`mekara_snapshot!`] can pin: a finished [`Run`], or a [`Command`] to run with an
/// empty stdin.
pub trait IntoRun {
    fn into_run(self) -> Run;
}

impl IntoRun for Run {
    fn into_run(self) -> Run {
        self
    }
}

impl IntoRun for Command {
    fn into_run(self) -> Run {
        run_with_stdin(self, "")
    }
}

/// Pins what a user saw of a `mekara` command (in the style of uv's `uv_snapshot!`): its
/// exit code, stdout and stderr together, scrubbed by [`Project::scrub`]. Takes the project
/// and a [`Command`] (run with nothing on stdin) or a finished [`Run`]; returns the `Run`.
///
/// `mekara_snapshot!(project, project.command(&["scripts"]), @"...")` pins inline;
/// without `@"..."` the snapshot is a file named after the test, or `name` when given first.
macro_rules! mekara_snapshot {
    ($project:expr, $what:expr, @$snapshot:literal) => {{
        let run = $crate::common::IntoRun::into_run($what);
        ::insta::assert_snapshot!($project.transcript(&run), @$snapshot);
        run
    }};
    ($name:expr, $project:expr, $what:expr) => {{
        let run = $crate::common::IntoRun::into_run($what);
        ::insta::assert_snapshot!($name, $project.transcript(&run));
        run
    }};
    ($project:expr, $what:expr) => {{
        let run = $crate::common::IntoRun::into_run($what);
        ::insta::assert_snapshot!($project.transcript(&run));
        run
    }};
}

pub fn run_with_stdin(mut cmd: Command, stdin: &str) -> Run {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mekara");
    let mut input = child.stdin.take().expect("stdin");
    // A process that exits before reading (a refused name) closes the pipe: not an error.
    if let Err(e) = input.write_all(stdin.as_bytes()) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    drop(input);
    Run::from_output(child.wait_with_output().expect("wait"))
}

/// Replaces run ids, run tokens, times, durations and the run store's size so output can be
/// pinned by snapshots.
pub fn redact(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut line = line.to_string();
        // run ids: 20261122-031254-fc2f
        let bytes: Vec<char> = line.chars().collect();
        let mut i = 0;
        let mut redacted = String::new();
        while i < bytes.len() {
            let rest: String = bytes[i..].iter().take(20).collect();
            if rest.len() == 20 && is_run_id(&rest) {
                redacted.push_str("[RUN]");
                i += 20;
                // A run handle's token: `.` and 32 hex digits.
                let token: String = bytes[i..].iter().take(33).collect();
                if token.len() == 33
                    && token.starts_with('.')
                    && token[1..].bytes().all(|b| b.is_ascii_hexdigit())
                {
                    redacted.push_str(".[TOKEN]");
                    i += 33;
                }
            } else {
                redacted.push(bytes[i]);
                i += 1;
            }
        }
        line = redacted;
        line = redact_times(&line);
        line = redact_tokens(&line);
        line = redact_store_size(&line);
        if let Some(pos) = line.find(" ms)")
            && let Some(open) = line[..pos].rfind('(')
        {
            line = format!("{}([MS] ms){}", &line[..open], &line[pos + 4..]);
        }
        if let Some(pos) = line.find(" s ──")
            && let Some(open) = line[..pos].rfind(" in ")
        {
            line = format!(
                "{} in [S] s ──{}",
                &line[..open],
                &line[pos + " s ──".len()..]
            );
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `line` with every run token standing alone (32 hex digits, as a cassette records it, not
/// after a run id) written as `[TOKEN]`.
fn redact_tokens(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while !rest.is_empty() {
        let hex = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
        let word = rest.bytes().take_while(u8::is_ascii_alphanumeric).count();
        if hex == 32 && word == 32 {
            out.push_str("[TOKEN]");
            rest = &rest[32..];
        } else if word > 0 {
            out.push_str(&rest[..word]);
            rest = &rest[word..];
        } else {
            let c = rest.chars().next().expect("not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// `line` with the size of the run store in the footer of `mekara runs` (`1 run, 763 B in
/// …`) written as `[SIZE]`: a journal holds process ids, whose length varies.
fn redact_store_size(line: &str) -> String {
    let Some((count, rest)) = line.split_once(", ") else {
        return line.to_string();
    };
    let Some((size, after)) = rest.split_once(" in ") else {
        return line.to_string();
    };
    let counted = count.ends_with(" run") || count.ends_with(" runs");
    let sized = size.split_once(' ').is_some_and(|(n, unit)| {
        n.parse::<f64>().is_ok() && ["B", "KiB", "MiB", "GiB"].contains(&unit)
    });
    if counted && sized {
        format!("{count}, [SIZE] in {after}")
    } else {
        line.to_string()
    }
}

/// `line` with every UTC time mekara prints (`2026-11-22T22:46:47Z`) written as `[TIME]`.
fn redact_times(line: &str) -> String {
    let shape = "dddd-dd-ddTdd:dd:ddZ";
    let fits = |s: &[u8]| {
        s.len() >= shape.len()
            && shape.bytes().zip(s).all(|(want, &got)| match want {
                b'd' => got.is_ascii_digit(),
                want => want == got,
            })
    };
    let bytes = line.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if fits(&bytes[i..]) {
            out.push_str("[TIME]");
            i += shape.len();
        } else {
            let c = line[i..].chars().next().expect("i is on a char boundary");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// A reply of mekara's (to an agent, over MCP), scrubbed, with what the bundled test scripts
/// draw by chance written as placeholders: `test:random`'s number as `[RANDOM]` (and whether
/// the guess was right as `[VERDICT]`),
/// `test:double-or-nothing`'s coin as `[COIN]` and its result as `[RESULT]`.
pub fn reply_shown(project: &Project, reply: &str) -> String {
    static DRAWN: std::sync::OnceLock<Vec<(regex::Regex, &str)>> = std::sync::OnceLock::new();
    let drawn = DRAWN.get_or_init(|| {
        let output = r"`[^\n]*\n\s*<output>\n\s*)\d+";
        [
            (format!(r"(shuf -i 1-100 -n 1{output}"), "${1}[RANDOM]"),
            (
                r"(secret=|the number was |The number was )\d+".to_string(),
                "${1}[RANDOM]",
            ),
            // A guess of 50 is right once in a hundred draws.
            (
                r"(Right!|Wrong:) ([Tt])he number".to_string(),
                "[VERDICT] the number",
            ),
            (format!(r"(shuf -i 0-1 -n 1{output}"), "${1}[COIN]"),
            (
                format!(r"(cat resulting-number.txt{output}"),
                "${1}[RESULT]",
            ),
            (r"(printf '%s\\n' )\d+".to_string(), "${1}[RESULT]"),
        ]
        .into_iter()
        .map(|(pattern, with)| (regex::Regex::new(&pattern).expect("a regex"), with))
        .collect()
    });
    let mut reply = reply.to_string();
    for (pattern, with) in drawn {
        reply = pattern.replace_all(&reply, *with).into_owned();
    }
    project.scrub(&reply)
}

/// `text` with every count of milliseconds (`waiting 13 ms`) written `[MS] ms`: a wait with
/// jitter lasts a different time in each run.
pub fn without_ms(text: &str) -> String {
    static MS: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let ms = MS.get_or_init(|| regex::Regex::new(r"\b\d+ ms\b").expect("a regex"));
    ms.replace_all(text, "[MS] ms").into_owned()
}

/// The lines of `text` that hold one of `needles`, in order: the part of a big text (a page,
/// a prompt) a snapshot is about.
pub fn lines_with(text: &str, needles: &[&str]) -> String {
    text.lines()
        .filter(|line| needles.iter().any(|n| line.contains(n)))
        .flat_map(|line| [line, "\n"])
        .collect()
}

/// The first run handle (`<run id>.<token>`, as `start` returns it) in `text`.
pub fn run_handle(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    (0..chars.len()).find_map(|i| {
        let candidate: String = chars[i..].iter().take(20 + 33).collect();
        let (id, token) = (candidate.get(..20)?, candidate.get(20..)?);
        let is_token = token.len() == 33
            && token.starts_with('.')
            && token[1..].bytes().all(|b| b.is_ascii_hexdigit());
        (is_run_id(id) && is_token).then_some(candidate)
    })
}

fn is_run_id(s: &str) -> bool {
    let c: Vec<char> = s.chars().collect();
    c.len() == 20
        && c[..8].iter().all(char::is_ascii_digit)
        && c[8] == '-'
        && c[9..15].iter().all(char::is_ascii_digit)
        && c[15] == '-'
        && c[16..].iter().all(char::is_ascii_hexdigit)
}

/// The requests a server logged at `MEKARA_LOG=debug` in `log`, in order: each its method
/// and protocol version (`` `tools/call`, protocol `2026-07-28` ``).
pub fn logged_requests(log: &str) -> Vec<&str> {
    log.lines()
        .filter_map(|l| l.split_once("mekara::transport: request ").map(|(_, r)| r))
        .collect()
}

/// An outside client or server that tests drive mekara with or against, installed under
/// `target/test-clients/` by `install`. The tests that use one are ignored unless the
/// `clients` feature is on (`cargo test --features clients`, as `.ci/run` does); with it
/// on, a missing install fails the test, saying what to run.
pub fn outside_client(relative: &str, what: &str, install: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/test-clients")
        .join(relative);
    assert!(
        path.exists(),
        "{what} is not installed at {}; run `bash {install}` (`bash .ci/run` installs every client)",
        path.display()
    );
    path
}

/// A new project with `mekara install --client CLIENT` run in it (mekara on the `PATH`, as
/// the clients need it), and what install printed.
pub fn installed_for(client: &str) -> (Project, String) {
    let project = Project::new();
    let out = project
        .command(&["install", "--client", client])
        .env("PATH", path_with_mekara())
        .output()
        .expect("run mekara install");
    assert!(out.status.success(), "mekara install failed: {out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (project, stdout)
}

/// The events of the project's one run's journal, parsed.
pub fn journal_events(project: &Project) -> Vec<serde_json::Value> {
    let ids = project.run_ids();
    assert_eq!(ids.len(), 1, "expected one run, found {ids:?}");
    project
        .journal(&ids[0])
        .lines()
        .map(|l| serde_json::from_str(l).expect("a journal line is JSON"))
        .collect()
}

/// The npm MCP servers installed by `tests/mcp-servers/install.sh`: the folder holding
/// `server-everything` and `server-filesystem`.
pub fn servers() -> PathBuf {
    let install = "tests/mcp-servers/install.sh";
    let dir = "mcp-servers/node_modules/@modelcontextprotocol";
    for server in ["server-everything", "server-filesystem"] {
        outside_client(&format!("{dir}/{server}/dist/index.js"), server, install);
    }
    outside_client(dir, "the MCP test servers", install)
}

/// The entry point of `server-everything` under `servers()`.
pub fn everything(dir: &Path) -> String {
    dir.join("server-everything/dist/index.js")
        .display()
        .to_string()
}
