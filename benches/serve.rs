//! `mekara serve`'s figures, printed side by side with reference servers measured in the same
//! run, against issue 6's targets.
//!
//! `cargo bench --locked --bench serve` speaks newline-delimited JSON-RPC over stdio to:
//!
//! - the release binary's `mekara serve` of a module whose `echo(message)` returns
//!   `"Echo: " + message`;
//! - the official Node example server, `@modelcontextprotocol/server-everything`, and its
//!   `echo` tool (installed by `bash benches/mcp-peers/install.sh`);
//! - a Python echo server on the official SDK's `MCPServer` (FastMCP),
//!   `benches/mcp-peers/echo_server.py`, run by the test virtualenv's Python (installed by
//!   `bash tests/python/install.sh`).
//!
//! A missing reference is said and left out. Figures:
//!
//! 1. a warm `tools/call` round trip of `echo`, alternating between the servers (issue: at
//!    most 0.2 ms median);
//! 2. start-up of `mekara serve` with 50 modules (4 functions each, with docstrings and
//!    annotations): spawn, `initialize`, `notifications/initialized`, `tools/list` until its
//!    reply is read (issue: at most 50 ms median), beside start-up with the single echo module.

mod common;

use common::stdio::{Bench, Figures, Server, load_average, percentile, range, round_order};
use common::{find_in_path, median, ms, verdict};

use std::path::{Path, PathBuf};
use std::time::Duration;

const WARM_CALLS: usize = 2000;
const WARM_UP_CALLS: usize = 200;
const START_RUNS: usize = 20;
const MODULES: usize = 50;

const TARGET_CALL_MS: f64 = 0.2;
const TARGET_START_MS: f64 = 50.0;

const ECHO_CALL: &str = r#"{"name":"echo","arguments":{"message":"ping"}}"#;

const ECHO_MODULE: &str = r#"
def echo(message: str) -> str:
    """Echo the message back.

    Args:
        message: What to echo.
    """
    return "Echo: " + message
"#;

fn main() {
    let bench = Bench::new("serve");
    let echo_dir = bench.root.join("echo");
    write(&echo_dir.join("echo.star"), ECHO_MODULE);
    let many_dir = bench.root.join("many");
    for i in 0..MODULES {
        write(&many_dir.join(format!("m{i:02}.star")), &module(i));
    }

    let mekara_program = PathBuf::from(env!("CARGO_BIN_EXE_mekara"));
    let mekara = Server {
        label: "mekara serve",
        program: mekara_program.clone(),
        args: vec!["serve".into(), echo_dir.display().to_string()],
        tool: "echo",
        call: ECHO_CALL,
        call_reply: "Echo: ping",
    };
    let mut servers = vec![mekara];
    let mut notes = Vec::new();
    match node_peer(&bench) {
        Ok(server) => servers.push(server),
        Err(why) => notes.push(why),
    }
    match python_peer() {
        Ok(server) => servers.push(server),
        Err(why) => notes.push(why),
    }
    for note in &notes {
        eprintln!("note: {note}");
    }
    let load_before = load_average();

    eprintln!("measuring warm calls ({WARM_CALLS} to each server, alternating)...");
    let refs: Vec<&Server> = servers.iter().collect();
    let warm = bench.warm_calls(&refs, WARM_UP_CALLS, WARM_CALLS);

    eprintln!("measuring start-up ({START_RUNS} runs each, with 50 modules and with 1)...");
    let starts = [
        Server {
            label: "50 modules",
            program: mekara_program.clone(),
            args: vec!["serve".into(), many_dir.display().to_string()],
            tool: "m49_f3",
            call: ECHO_CALL,
            call_reply: "",
        },
        Server {
            label: "1 module",
            program: mekara_program.clone(),
            args: vec!["serve".into(), echo_dir.display().to_string()],
            tool: "echo",
            call: ECHO_CALL,
            call_reply: "",
        },
    ];
    let mut start: Vec<Figures> = starts.iter().map(|_| Figures::default()).collect();
    for round in 0..=START_RUNS {
        for i in round_order(starts.len(), round) {
            let (elapsed, rss_kib) = bench.cold_start(&starts[i], Duration::ZERO);
            if round > 0 {
                start[i].times_ms.push(ms(elapsed));
                start[i].rss_kib.push(rss_kib);
            }
        }
    }

    println!();
    println!(
        "mekara serve benchmark (stdio): {}",
        mekara_program.display()
    );
    for note in &notes {
        println!("reference NOT MEASURED: {note}");
    }
    println!(
        "load average: {load_before} before, {} after",
        load_average()
    );
    println!();
    println!(
        "1. warm tools/call round trip of `echo` ({WARM_CALLS} calls each, alternating, after {WARM_UP_CALLS} unmeasured)"
    );
    println!(
        "  {:<22} {:>10} {:>22} {:>22}   {:<10} verdict",
        "server", "median", "10th .. 90th pct", "fastest .. slowest", "target"
    );
    for (server, figures) in servers.iter().zip(&warm) {
        let times = &figures.times_ms;
        let (lo, hi) = range(times);
        let is_mekara = server.label == "mekara serve";
        println!(
            "  {:<22} {:>7.3} ms {:>22} {:>22}   {:<10} {}",
            server.label,
            median(times),
            format!(
                "{:.3} .. {:.3} ms",
                percentile(times, 10),
                percentile(times, 90)
            ),
            format!("{lo:.3} .. {hi:.3} ms"),
            if is_mekara {
                format!("<= {TARGET_CALL_MS} ms")
            } else {
                String::new()
            },
            if is_mekara {
                verdict(median(times), TARGET_CALL_MS, "ms", 3)
            } else {
                String::new()
            }
        );
    }
    println!();
    println!(
        "2. start-up: spawn, initialize, initialized, tools/list reply ({START_RUNS} runs each, interleaved)"
    );
    for (server, figures) in starts.iter().zip(&start) {
        let times = &figures.times_ms;
        let (lo, hi) = range(times);
        let is_target = server.label == "50 modules";
        println!(
            "  {:<22} {:>7.1} ms {:>22}   {:<10} {}",
            server.label,
            median(times),
            format!("{lo:.1} .. {hi:.1} ms"),
            if is_target {
                format!("<= {TARGET_START_MS} ms")
            } else {
                String::new()
            },
            if is_target {
                verdict(median(times), TARGET_START_MS, "ms", 1)
            } else {
                String::new()
            }
        );
    }
    println!();
}

/// Module `i` of the start-up set: four annotated, documented functions.
fn module(i: usize) -> String {
    let mut text = format!("\"\"\"Module {i} of the start-up benchmark.\"\"\"\n");
    for f in 0..4 {
        text.push_str(&format!(
            r#"
def m{i:02}_f{f}(name: str, count: int = 1, tags: list[str] | None = None) -> dict[str, int]:
    """Function {f} of module {i}.

    Args:
        name: A name.
        count: How many.
        tags: Some tags.
    """
    return {{name: count + len(tags or [])}}
"#
        ));
    }
    text
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent folder"))
        .unwrap_or_else(|e| panic!("mkdir for {}: {e}", path.display()));
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The Node example server, or why it cannot be measured.
fn node_peer(bench: &Bench) -> Result<Server, String> {
    let entry = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "target/test-clients/bench/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    let install = "run `bash benches/mcp-peers/install.sh`";
    if !entry.is_file() {
        return Err(format!(
            "server-everything is not installed ({} is missing); {install}",
            entry.display()
        ));
    }
    let node = find_in_path(&bench.path, "node")
        .ok_or_else(|| format!("server-everything needs `node` on PATH; {install}"))?;
    Ok(Server {
        label: "Node server-everything",
        program: node,
        args: vec![entry.display().to_string(), "stdio".into()],
        tool: "echo",
        call: ECHO_CALL,
        call_reply: "Echo: ping",
    })
}

/// The Python `MCPServer` echo server, or why it cannot be measured.
fn python_peer() -> Result<Server, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("target/test-clients/py/bin/python");
    if !python.is_file() {
        return Err(format!(
            "the Python MCP SDK is not installed ({} is missing); run `bash tests/python/install.sh`",
            python.display()
        ));
    }
    Ok(Server {
        label: "Python MCPServer",
        program: python,
        args: vec![
            root.join("benches/mcp-peers/echo_server.py")
                .display()
                .to_string(),
        ],
        tool: "echo",
        call: ECHO_CALL,
        call_reply: "Echo: ping",
    })
}
