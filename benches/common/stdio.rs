//! A stdio MCP client for the benches: spawn a server in a temporary project, `initialize`,
//! call a tool, read its peak RSS. A plain client on std only: writing lines and finding
//! `"id":N` in the replies is all it needs, and each cold sample is a whole process.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::ms;

/// How long a server may take to exit once its stdin is closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

const PROTOCOL_VERSION: &str = "2025-06-18";

/// A server to measure, and the warm call to make to it.
pub struct Server {
    pub label: &'static str,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The tool the warm call calls; `tools/list` must list it.
    pub tool: &'static str,
    /// The warm call's `params`.
    pub call: &'static str,
    /// What the warm call's reply must contain.
    pub call_reply: &'static str,
}

/// The temporary project and home folder, removed at the end.
pub struct Bench {
    pub dir: PathBuf,
    pub root: PathBuf,
    pub home: PathBuf,
    /// The caller's `PATH`, which the servers get too (the reference needs `node`).
    pub path: OsString,
}

impl Bench {
    pub fn new(name: &str) -> Bench {
        let dir = std::env::temp_dir().join(format!("mekara-bench-{name}-{}", std::process::id()));
        // A folder left by an earlier bench that had the same pid and was killed.
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("project");
        let home = dir.join("home");
        for folder in [root.join(".mekara"), home.clone()] {
            std::fs::create_dir_all(&folder)
                .unwrap_or_else(|e| panic!("mkdir {}: {e}", folder.display()));
        }
        Bench {
            dir,
            root,
            home,
            path: std::env::var_os("PATH").unwrap_or_default(),
        }
    }

    /// Starts `server` in the project with a hermetic environment.
    pub fn spawn(&self, server: &Server) -> Session {
        let log = self.dir.join(format!("{}.stderr", server.label));
        let stderr = File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let mut child = Command::new(&server.program)
            .args(&server.args)
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("NO_COLOR", "1")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", server.program.display()));
        Session {
            label: server.label,
            stdin: child.stdin.take().expect("stdin is piped"),
            stdout: BufReader::new(child.stdout.take().expect("stdout is piped")),
            child,
            log,
            line: String::new(),
            next_id: 1,
        }
    }

    /// Spawns `server` and takes it to the `tools/list` reply; returns that time and the
    /// server's peak RSS in KiB after idling for `idle`.
    pub fn cold_start(&self, server: &Server, idle: Duration) -> (Duration, u64) {
        let (elapsed, rss, _) = self.cold_start_memory(server, idle);
        (elapsed, rss)
    }

    /// [`Bench::cold_start`], also returning the server's anonymous (private) RSS in KiB
    /// then: its own memory, without the pages of its binary and libraries that it maps from
    /// the shared page cache (which grow with the size of the code, not with its use).
    pub fn cold_start_memory(&self, server: &Server, idle: Duration) -> (Duration, u64, u64) {
        let started = Instant::now();
        let mut session = self.spawn(server);
        session.initialize(server);
        let elapsed = started.elapsed();
        std::thread::sleep(idle);
        let rss = session.peak_rss_kib();
        let anon = session.status_kib("RssAnon");
        session.close();
        (elapsed, rss, anon)
    }

    /// One initialized session per server, `warm_up` unmeasured calls to each, then `calls`
    /// measured calls to each, alternating between them.
    pub fn warm_calls(&self, servers: &[&Server], warm_up: usize, calls: usize) -> Vec<Warm> {
        let mut sessions: Vec<Session> = servers
            .iter()
            .map(|server| {
                let mut session = self.spawn(server);
                session.initialize(server);
                session
            })
            .collect();
        for (session, server) in sessions.iter_mut().zip(servers) {
            for _ in 0..warm_up {
                session.call_tool(server);
            }
        }
        let mut warm: Vec<Warm> = servers.iter().map(|_| Warm::default()).collect();
        for round in 0..calls {
            for i in round_order(servers.len(), round) {
                let started = Instant::now();
                sessions[i].call_tool(servers[i]);
                warm[i].times_ms.push(ms(started.elapsed()));
            }
        }
        for (session, figures) in sessions.into_iter().zip(&mut warm) {
            figures.rss_kib = session.peak_rss_kib();
            session.close();
        }
        warm
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running server and the client end of its stdio.
pub struct Session {
    pub label: &'static str,
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: BufReader<ChildStdout>,
    /// The server's stderr, shown when it misbehaves.
    pub log: PathBuf,
    /// The last line read, kept to reuse its buffer.
    pub line: String,
    pub next_id: u64,
}

impl Session {
    /// `initialize`, `notifications/initialized`, `tools/list`: what a client does first.
    pub fn initialize(&mut self, server: &Server) {
        let params = format!(
            r#"{{"protocolVersion":"{PROTOCOL_VERSION}","capabilities":{{}},"clientInfo":{{"name":"mekara-bench","version":"0"}}}}"#
        );
        self.request("initialize", &params);
        self.expect(r#""serverInfo""#);
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        self.request("tools/list", "{}");
        self.expect(&format!(r#""name":"{}""#, server.tool));
    }

    /// The warm call, checked.
    pub fn call_tool(&mut self, server: &Server) {
        self.request("tools/call", server.call);
        self.expect(server.call_reply);
    }

    /// Sends a request and reads lines until its reply, which is left in `self.line`.
    /// Notifications the server sends meanwhile are skipped.
    pub fn request(&mut self, method: &str, params: &str) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        ));
        loop {
            self.line.clear();
            let read = self.stdout.read_line(&mut self.line);
            if !matches!(read, Ok(n) if n > 0) {
                self.fail(&format!("no reply to `{method}` (read: {read:?})"));
            }
            if is_reply(&self.line, id) {
                return;
            }
        }
    }

    /// One message, as one line in one write.
    pub fn send(&mut self, message: &str) {
        let line = format!("{message}\n");
        if let Err(e) = self.stdin.write_all(line.as_bytes()) {
            self.fail(&format!("cannot write to its stdin: {e}"));
        }
    }

    pub fn expect(&self, needle: &str) {
        if !self.line.contains(needle) {
            self.fail(&format!("expected `{needle}` in the reply:\n{}", self.line));
        }
    }

    pub fn fail(&self, what: &str) -> ! {
        let stderr = std::fs::read_to_string(&self.log).unwrap_or_default();
        panic!("{}: {what}\n[stderr]\n{stderr}", self.label);
    }

    /// `VmHWM` of the server process, in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM")
    }

    /// The field `name` (a size in kB) of the server process's `/proc/PID/status`.
    pub fn status_kib(&self, name: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc/PID/status (Linux only)");
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("a {name} line in /proc/PID/status"))
    }

    /// Closes stdin, which ends a stdio server; kills it if it has not exited in time.
    pub fn close(self) {
        let Session {
            mut child,
            stdin,
            label,
            ..
        } = self;
        drop(stdin);
        let deadline = Instant::now() + EXIT_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        eprintln!("note: {label} did not exit within {EXIT_GRACE:?} of stdin closing; killed");
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Whether `line` is the reply (result or error) to request `id`: it has `"id":N` (spaces
/// allowed around the colon) and a `result` or `error` member. Good enough for the replies of
/// servers that never send the bench requests of their own.
pub fn is_reply(line: &str, id: u64) -> bool {
    let key = r#""id""#;
    let mut rest = line;
    while let Some(at) = rest.find(key) {
        rest = &rest[at + key.len()..];
        let Some(value) = rest.trim_start().strip_prefix(':').map(str::trim_start) else {
            continue;
        };
        let digits = value.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && value[..digits].parse() == Ok(id) {
            return line.contains(r#""result""#) || line.contains(r#""error""#);
        }
    }
    false
}

/// The string value of the first `"field": "..."` in a JSON text, without unescaping.
pub fn json_string_field(json: &str, field: &str) -> Option<String> {
    let key = format!("\"{field}\"");
    let rest = &json[json.find(&key)? + key.len()..];
    let rest = rest
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

/// The order of the servers in a round: swapped every round, so neither always goes first.
pub fn round_order(servers: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..servers).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// The 1-minute load average and the number of CPUs, to judge how busy the machine was.
pub fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!(
        "{} on {cpus} CPUs",
        load.split_whitespace().next().unwrap_or("?")
    )
}

/// The cold starts of one server.
#[derive(Default)]
pub struct Figures {
    pub times_ms: Vec<f64>,
    pub rss_kib: Vec<u64>,
}

/// The warm calls to one server, and its peak RSS after them.
#[derive(Default)]
pub struct Warm {
    pub times_ms: Vec<f64>,
    pub rss_kib: u64,
}

/// The value below which `p` percent of the values lie (nearest rank).
pub fn percentile(values: &[f64], p: usize) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[(sorted.len() - 1) * p / 100]
}

pub fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}
