//! `mekara mcp`'s figures, printed side by side with a reference server measured in the same
//! run, and with the figures issue 3 quotes.
//!
//! `cargo bench --locked --bench mcp` speaks newline-delimited JSON-RPC over stdio to the
//! release binary's `mekara mcp`, run in a temporary project with its own `HOME`, and to the
//! official Node example server, `@modelcontextprotocol/server-everything`, which
//! `bash benches/mcp-peers/install.sh` installs at a pinned version into
//! `target/test-clients/bench/` (without it, the bench says so and fills mekara's column only):
//!
//! 1. cold start: spawn, `initialize`, `notifications/initialized`, `tools/list`, until the
//!    `tools/list` reply is read;
//! 2. a warm `tools/call` round trip: mekara's `status`, the reference's `echo`;
//! 3. the peak RSS (`VmHWM` of `/proc/PID/status`) of a server left idle after `initialize`
//!    and `tools/list`.
//!
//! Cold starts are taken in interleaved rounds (one unmeasured round first, the order of the
//! servers swapped every round) and warm calls alternate between the two servers, so a slow
//! moment of the machine lands on both columns. Each figure is shown with its spread: on a busy
//! machine the spread says how far to trust the median. The issue's figures for mekara's Python
//! predecessor are quoted, not measured: it is not installed here.
//!
//! A plain `main` on std only: a client needs no more than writing lines and finding `"id":N`
//! in the replies, and each cold sample is a whole process.

mod common;

use common::{find_in_path, median, ms, verdict};

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Cold starts of each server.
const COLD_RUNS: usize = 20;
/// Measured warm calls to each server.
const WARM_CALLS: usize = 2000;
/// Unmeasured calls first: page faults, allocator growth, the reference's JIT.
const WARM_UP_CALLS: usize = 200;
/// How long a server idles after `tools/list` before its RSS is read, so that work it does
/// shortly after answering is counted too.
const IDLE: Duration = Duration::from_millis(250);
/// How long a server may take to exit once its stdin is closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

const TARGET_COLD_MS: f64 = 15.0;
const TARGET_CALL_MS: f64 = 0.3;
const TARGET_RSS_MB: f64 = 15.0;

/// Issue 3's figures on this kind of machine: the Node example server, then the Python
/// predecessor.
const QUOTED_COLD_MS: (f64, f64) = (238.0, 504.0);
const QUOTED_CALL_MS: (f64, f64) = (0.19, 2.6);
const QUOTED_RSS_MB: (f64, f64) = (68.0, 58.0);

/// Where `benches/mcp-peers/install.sh` installs the reference, from the package root.
const PEER_DIR: &str = "target/test-clients/bench";
const PEER_PACKAGE: &str = "node_modules/@modelcontextprotocol/server-everything";

const PROTOCOL_VERSION: &str = "2025-06-18";

fn main() {
    let bench = Bench::new();
    let mekara = Server {
        label: "mekara",
        program: PathBuf::from(env!("CARGO_BIN_EXE_mekara")),
        args: vec!["mcp".into()],
        tool: "status",
        call: r#"{"name":"status","arguments":{}}"#,
        call_reply: r#""isError":false"#,
    };
    let peer = bench.peer();
    let mut servers = vec![&mekara];
    match &peer {
        Ok(peer) => servers.push(&peer.server),
        Err(why) => eprintln!("note: {why}; measuring mekara only"),
    }
    let load_before = load_average();

    eprintln!("measuring cold starts ({COLD_RUNS} of each server)...");
    let mut cold: Vec<Figures> = servers.iter().map(|_| Figures::default()).collect();
    // One unmeasured round first: page cache, each binary's first start.
    for round in 0..=COLD_RUNS {
        for i in round_order(servers.len(), round) {
            let (elapsed, rss_kib) = bench.cold_start(servers[i]);
            if round > 0 {
                cold[i].times_ms.push(ms(elapsed));
                cold[i].rss_kib.push(rss_kib);
            }
        }
    }

    eprintln!("measuring warm calls ({WARM_CALLS} to each server, alternating)...");
    let warm = bench.warm_calls(&servers);

    let report = Report {
        binary: &mekara.program,
        peer: &peer,
        cold: &cold,
        warm: &warm,
        load_before,
        load_after: load_average(),
    };
    report.print();
}

/// A server to measure, and the warm call to make to it.
struct Server {
    label: &'static str,
    program: PathBuf,
    args: Vec<String>,
    /// The tool the warm call calls; `tools/list` must list it.
    tool: &'static str,
    /// The warm call's `params`.
    call: &'static str,
    /// What the warm call's reply must contain.
    call_reply: &'static str,
}

/// The reference server, with what the report says about it.
struct Peer {
    server: Server,
    version: String,
    node: String,
}

/// The temporary project and home folder, removed at the end.
struct Bench {
    dir: PathBuf,
    root: PathBuf,
    home: PathBuf,
    /// The caller's `PATH`, which the servers get too (the reference needs `node`).
    path: OsString,
}

impl Bench {
    fn new() -> Bench {
        let dir = std::env::temp_dir().join(format!("mekara-bench-mcp-{}", std::process::id()));
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

    /// The reference server, or why it cannot be measured.
    fn peer(&self) -> Result<Peer, String> {
        let package = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(PEER_DIR)
            .join(PEER_PACKAGE);
        let entry = package.join("dist/index.js");
        let install = "run `bash benches/mcp-peers/install.sh` to install it";
        if !entry.is_file() {
            return Err(format!(
                "the reference server is not installed ({} is missing); {install}",
                entry.display()
            ));
        }
        let node = find_in_path(&self.path, "node")
            .ok_or_else(|| format!("the reference server needs `node` on PATH; {install}"))?;
        let node_version = Command::new(&node)
            .arg("--version")
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .unwrap_or_default();
        let manifest = std::fs::read_to_string(package.join("package.json")).unwrap_or_default();
        Ok(Peer {
            server: Server {
                label: "server-everything",
                program: node,
                args: vec![entry.display().to_string(), "stdio".into()],
                tool: "echo",
                call: r#"{"name":"echo","arguments":{"message":"ping"}}"#,
                call_reply: "Echo: ping",
            },
            version: json_string_field(&manifest, "version").unwrap_or_else(|| "?".into()),
            node: node_version,
        })
    }

    /// Starts `server` in the project with a hermetic environment.
    fn spawn(&self, server: &Server) -> Session {
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
    /// server's peak RSS in KiB after idling [`IDLE`].
    fn cold_start(&self, server: &Server) -> (Duration, u64) {
        let started = Instant::now();
        let mut session = self.spawn(server);
        session.initialize(server);
        let elapsed = started.elapsed();
        std::thread::sleep(IDLE);
        let rss = session.peak_rss_kib();
        session.close();
        (elapsed, rss)
    }

    /// One initialized session per server, then [`WARM_CALLS`] measured calls to each,
    /// alternating between them.
    fn warm_calls(&self, servers: &[&Server]) -> Vec<Warm> {
        let mut sessions: Vec<Session> = servers
            .iter()
            .map(|server| {
                let mut session = self.spawn(server);
                session.initialize(server);
                session
            })
            .collect();
        for (session, server) in sessions.iter_mut().zip(servers) {
            for _ in 0..WARM_UP_CALLS {
                session.call_tool(server);
            }
        }
        let mut warm: Vec<Warm> = servers.iter().map(|_| Warm::default()).collect();
        for round in 0..WARM_CALLS {
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
struct Session {
    label: &'static str,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The server's stderr, shown when it misbehaves.
    log: PathBuf,
    /// The last line read, kept to reuse its buffer.
    line: String,
    next_id: u64,
}

impl Session {
    /// `initialize`, `notifications/initialized`, `tools/list`: what a client does first.
    fn initialize(&mut self, server: &Server) {
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
    fn call_tool(&mut self, server: &Server) {
        self.request("tools/call", server.call);
        self.expect(server.call_reply);
    }

    /// Sends a request and reads lines until its reply, which is left in `self.line`.
    /// Notifications the server sends meanwhile are skipped.
    fn request(&mut self, method: &str, params: &str) {
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
    fn send(&mut self, message: &str) {
        let line = format!("{message}\n");
        if let Err(e) = self.stdin.write_all(line.as_bytes()) {
            self.fail(&format!("cannot write to its stdin: {e}"));
        }
    }

    fn expect(&self, needle: &str) {
        if !self.line.contains(needle) {
            self.fail(&format!("expected `{needle}` in the reply:\n{}", self.line));
        }
    }

    fn fail(&self, what: &str) -> ! {
        let stderr = std::fs::read_to_string(&self.log).unwrap_or_default();
        panic!("{}: {what}\n[stderr]\n{stderr}", self.label);
    }

    /// `VmHWM` of the server process, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc/PID/status (Linux only)");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("a VmHWM line in /proc/PID/status")
    }

    /// Closes stdin, which ends a stdio server; kills it if it has not exited in time.
    fn close(self) {
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
fn is_reply(line: &str, id: u64) -> bool {
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
fn json_string_field(json: &str, field: &str) -> Option<String> {
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
fn round_order(servers: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..servers).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// The 1-minute load average and the number of CPUs, to judge how busy the machine was.
fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!(
        "{} on {cpus} CPUs",
        load.split_whitespace().next().unwrap_or("?")
    )
}

/// The cold starts of one server.
#[derive(Default)]
struct Figures {
    times_ms: Vec<f64>,
    rss_kib: Vec<u64>,
}

/// The warm calls to one server, and its peak RSS after them.
#[derive(Default)]
struct Warm {
    times_ms: Vec<f64>,
    rss_kib: u64,
}

fn mb(kib: u64) -> f64 {
    // KiB from the kernel, shown in MB of 10^6 bytes: the stricter reading of "15 MB".
    kib as f64 * 1024.0 / 1e6
}

/// The value below which `p` percent of the values lie (nearest rank).
fn percentile(values: &[f64], p: usize) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[(sorted.len() - 1) * p / 100]
}

fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

struct Report<'a> {
    binary: &'a Path,
    peer: &'a Result<Peer, String>,
    /// Per server, mekara first.
    cold: &'a [Figures],
    warm: &'a [Warm],
    load_before: String,
    load_after: String,
}

impl Report<'_> {
    fn print(&self) {
        println!();
        println!(
            "mekara MCP server benchmark (stdio): {}",
            self.binary.display()
        );
        match self.peer {
            Ok(peer) => println!(
                "reference, measured in this run, interleaved: @modelcontextprotocol/server-everything {} on node {}",
                peer.version, peer.node
            ),
            Err(why) => println!("reference: NOT MEASURED: {why}"),
        }
        println!(
            "issue: Node / Py = figures quoted from issue 3, not measured here: the Node example server, mekara's Python predecessor"
        );
        println!(
            "load average: {} before, {} after",
            self.load_before, self.load_after
        );
        println!();
        line(
            "figure",
            "mekara",
            "server-everything",
            "issue: Node / Py",
            "target",
            "verdict",
        );
        println!("  {}", "-".repeat(124));

        let cold_ms: Vec<&[f64]> = self.cold.iter().map(|f| f.times_ms.as_slice()).collect();
        let warm_ms: Vec<&[f64]> = self.warm.iter().map(|w| w.times_ms.as_slice()).collect();
        let idle_mb: Vec<Vec<f64>> = self
            .cold
            .iter()
            .map(|f| f.rss_kib.iter().copied().map(mb).collect())
            .collect();
        let idle_mb: Vec<&[f64]> = idle_mb.iter().map(Vec::as_slice).collect();
        let called_mb: Vec<Vec<f64>> = self.warm.iter().map(|w| vec![mb(w.rss_kib)]).collect();
        let called_mb: Vec<&[f64]> = called_mb.iter().map(Vec::as_slice).collect();
        let spread = |decimals: usize, unit: &'static str| {
            move |v: &[f64]| {
                let (lo, hi) = range(v);
                format!("{lo:.decimals$} .. {hi:.decimals$} {unit}")
            }
        };

        println!(
            "1. cold start: spawn, initialize, initialized, tools/list reply ({COLD_RUNS} runs each)"
        );
        let median_ms = median(cold_ms[0]);
        let (mekara, peer) = cells(&cold_ms, |v| format!("{:.1} ms", median(v)));
        line(
            "   median",
            &mekara,
            &peer,
            &quoted(QUOTED_COLD_MS, "ms", 0),
            &format!("<= {TARGET_COLD_MS} ms"),
            &verdict(median_ms, TARGET_COLD_MS, "ms", 1),
        );
        let (mekara, peer) = cells(&cold_ms, spread(1, "ms"));
        line("   fastest .. slowest", &mekara, &peer, "", "", "");

        println!(
            "2. warm tools/call round trip ({WARM_CALLS} calls each, alternating): mekara `status`, reference `echo`"
        );
        let median_ms = median(warm_ms[0]);
        let (mekara, peer) = cells(&warm_ms, |v| format!("{:.3} ms", median(v)));
        line(
            "   median",
            &mekara,
            &peer,
            &quoted(QUOTED_CALL_MS, "ms", 2),
            &format!("<= {TARGET_CALL_MS} ms"),
            &verdict(median_ms, TARGET_CALL_MS, "ms", 3),
        );
        let (mekara, peer) = cells(&warm_ms, |v| {
            format!("{:.3} .. {:.3} ms", percentile(v, 10), percentile(v, 90))
        });
        line("   10th .. 90th percentile", &mekara, &peer, "", "", "");
        let (mekara, peer) = cells(&warm_ms, spread(3, "ms"));
        line("   fastest .. slowest", &mekara, &peer, "", "", "");

        println!(
            "3. peak RSS (VmHWM), idle {} ms after initialize + tools/list ({COLD_RUNS} runs each)",
            IDLE.as_millis()
        );
        let largest_mb = range(idle_mb[0]).1;
        let (mekara, peer) = cells(&idle_mb, |v| format!("{:.1} MB", range(v).1));
        line(
            "   largest",
            &mekara,
            &peer,
            &quoted(QUOTED_RSS_MB, "MB", 0),
            &format!("<= {TARGET_RSS_MB} MB"),
            &verdict(largest_mb, TARGET_RSS_MB, "MB", 1),
        );
        let (mekara, peer) = cells(&idle_mb, spread(1, "MB"));
        line("   smallest .. largest", &mekara, &peer, "", "", "");
        let (mekara, peer) = cells(&called_mb, |v| format!("{:.1} MB", v[0]));
        line(
            &format!("   after {} warm calls", WARM_UP_CALLS + WARM_CALLS),
            &mekara,
            &peer,
            "",
            "",
            "",
        );
        println!();
    }
}

/// mekara's and the reference's figure (`-` when the reference was not measured).
fn cells(samples: &[&[f64]], show: impl Fn(&[f64]) -> String) -> (String, String) {
    let peer = samples.get(1).map_or_else(|| "-".to_string(), |v| show(v));
    (show(samples[0]), peer)
}

fn line(label: &str, mekara: &str, peer: &str, quoted: &str, target: &str, verdict: &str) {
    let text =
        format!("  {label:<38} {mekara:>18} {peer:>22} {quoted:>18}   {target:<12} {verdict}");
    println!("{}", text.trim_end());
}

/// The issue's two figures, Node example server / Python predecessor.
fn quoted((node, python): (f64, f64), unit: &str, decimals: usize) -> String {
    format!("{node:.decimals$} / {python:.decimals$} {unit}")
}
