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
//! A plain `main` on std only; the stdio client is `benches/common/stdio.rs`, shared with
//! `benches/serve.rs`.

mod common;

use common::stdio::{
    Bench, Figures, Server, Warm, json_string_field, load_average, percentile, range, round_order,
};
use common::{find_in_path, median, ms, verdict};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Cold starts of each server.
const COLD_RUNS: usize = 20;
/// Measured warm calls to each server.
const WARM_CALLS: usize = 2000;
/// Unmeasured calls first: page faults, allocator growth, the reference's JIT.
const WARM_UP_CALLS: usize = 200;
/// How long a server idles after `tools/list` before its RSS is read, so that work it does
/// shortly after answering is counted too.
const IDLE: Duration = Duration::from_millis(250);

const TARGET_COLD_MS: f64 = 15.0;
const TARGET_CALL_MS: f64 = 0.3;
const TARGET_RSS_MB: f64 = 15.0;

/// Issue 3's figures on this kind of machine: the Node example server, then the Python
/// predecessor.
const QUOTED_COLD_MS: (f64, f64) = (238.0, 504.0);
const QUOTED_CALL_MS: (f64, f64) = (0.19, 2.6);
const QUOTED_RSS_MB: (f64, f64) = (68.0, 58.0);

/// The reference server, or why it cannot be measured.
fn peer(bench: &Bench) -> Result<Peer, String> {
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
    let node = find_in_path(&bench.path, "node")
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

/// Where `benches/mcp-peers/install.sh` installs the reference, from the package root.
const PEER_DIR: &str = "target/test-clients/bench";
const PEER_PACKAGE: &str = "node_modules/@modelcontextprotocol/server-everything";

fn main() {
    let bench = Bench::new("mcp");
    let mekara = Server {
        label: "mekara",
        program: PathBuf::from(env!("CARGO_BIN_EXE_mekara")),
        args: vec!["mcp".into()],
        tool: "status",
        call: r#"{"name":"status","arguments":{}}"#,
        call_reply: r#""isError":false"#,
    };
    let peer = peer(&bench);
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
            let (elapsed, rss_kib) = bench.cold_start(servers[i], IDLE);
            if round > 0 {
                cold[i].times_ms.push(ms(elapsed));
                cold[i].rss_kib.push(rss_kib);
            }
        }
    }

    eprintln!("measuring warm calls ({WARM_CALLS} to each server, alternating)...");
    let warm = bench.warm_calls(&servers, WARM_UP_CALLS, WARM_CALLS);

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

/// The reference server, with what the report says about it.
struct Peer {
    server: Server,
    version: String,
    node: String,
}

fn mb(kib: u64) -> f64 {
    // KiB from the kernel, shown in MB of 10^6 bytes: the stricter reading of "15 MB".
    kib as f64 * 1024.0 / 1e6
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
