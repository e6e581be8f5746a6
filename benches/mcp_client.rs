//! mekara's MCP client, measured beside the bare `rmcp` client against the same real servers
//! in the same run (issue 5's targets).
//!
//! `cargo bench --locked --bench mcp_client` needs the npm servers that
//! `bash tests/mcp-servers/install.sh` installs into `target/test-clients/mcp-servers/`
//! (`@modelcontextprotocol/server-everything` and `server-filesystem`); without them it says
//! so and stops.
//!
//! 1. **Call overhead**: one warm `tools/call` of server-everything's `echo` through
//!    `mekara::McpClient::call` (policy, cached tool list, schema check, the hop to the
//!    client's own runtime and back, redaction) against the same call made with a bare rmcp
//!    client on the bench thread's runtime, each to its own server-everything process. Calls
//!    alternate between the two so a slow moment of the machine lands on both. Target: the
//!    difference of the medians ≤ 0.2 ms.
//! 2. **Listing 3 stdio servers**: `mekara tools list` (the real binary: start, read the
//!    configuration, contact everything, everything-as-second-name and filesystem in
//!    parallel, print) against the slowest of the three servers' own start-up (spawn,
//!    `initialize`, `tools/list` with the bare rmcp client). Target: ≤ slowest + 20 ms. Also
//!    shown: the bare client starting the same three in parallel, which is what the machine
//!    can do at best when it has fewer free cores than servers.
//! 3. **Listing 3 native stdio servers**: the same measure with three `mekara serve`
//!    processes (a few milliseconds of CPU to start, unlike node's hundreds), so that what
//!    is left above the slowest start-up is the client's own cost, not a queue for the CPU.

mod common;

use common::{median, ms, verdict};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mekara::CancelToken;
use mekara::McpClient;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value as Json};

const WARM_UP_CALLS: usize = 200;
const CALLS: usize = 2000;
const LIST_RUNS: usize = 15;
const TARGET_OVERHEAD_MS: f64 = 0.2;
const TARGET_LIST_EXTRA_MS: f64 = 20.0;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let servers = root.join("target/test-clients/mcp-servers/node_modules/@modelcontextprotocol");
    let everything = servers.join("server-everything/dist/index.js");
    let filesystem = servers.join("server-filesystem/dist/index.js");
    if !everything.is_file() || !filesystem.is_file() {
        println!(
            "mcp_client bench: the npm servers are not installed at {}; run `bash tests/mcp-servers/install.sh`",
            servers.display()
        );
        return;
    }
    let project = tempfile::tempdir().expect("a temporary project");
    let data = project.path().join("data");
    std::fs::create_dir_all(project.path().join(".mekara")).expect("mkdir");
    std::fs::create_dir_all(&data).expect("mkdir");
    let mcp_json = serde_json::json!({"mcpServers": {
        "everything": {"command": "node", "args": [everything, "stdio"]},
        "everything2": {"command": "node", "args": [everything, "stdio"]},
        "fs": {"command": "node", "args": [filesystem, data]},
    }});
    std::fs::write(project.path().join(".mcp.json"), mcp_json.to_string()).expect("write");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");

    println!("mekara MCP client vs bare rmcp client, same servers, same run\n");
    call_overhead(&runtime, project.path(), &everything);
    println!();
    listing(&runtime, project.path(), &everything, &filesystem, &data);
    println!();
    listing_native(&runtime, &root.join("examples/tools"));
}

/// `mekara tools list` of three `mekara serve` servers against one's own start-up.
fn listing_native(runtime: &tokio::runtime::Runtime, tools: &Path) {
    let mekara = PathBuf::from(env!("CARGO_BIN_EXE_mekara"));
    let project = tempfile::tempdir().expect("a temporary project");
    std::fs::create_dir_all(project.path().join(".mekara")).expect("mkdir");
    let server = serde_json::json!({"command": mekara, "args": ["serve", tools]});
    let mcp_json = serde_json::json!({"mcpServers": {"a": server, "b": server, "c": server}});
    std::fs::write(project.path().join(".mcp.json"), mcp_json.to_string()).expect("write");
    let serve = Path::new("serve");
    let mut list_ms = Vec::new();
    let mut alone_ms = Vec::new();
    for round in 0..=LIST_RUNS {
        let t = Instant::now();
        let out = Command::new(&mekara)
            .args(["tools", "list", "--trust"])
            .current_dir(project.path())
            .env("HOME", project.path())
            .stderr(std::process::Stdio::null())
            .output()
            .expect("run mekara");
        let l = t.elapsed();
        assert!(out.status.success(), "mekara tools list failed");
        let alone = (0..3)
            .map(|_| runtime.block_on(start_up(&mekara, &[serve, tools])))
            .max()
            .expect("three start-ups");
        if round > 0 {
            list_ms.push(ms(l));
            alone_ms.push(ms(alone));
        }
    }
    let (l, alone) = (median(&list_ms), median(&alone_ms));
    let extra = l - alone;
    println!(
        "3. listing the tools of 3 native stdio servers (`mekara serve`), median of {LIST_RUNS}:"
    );
    println!("   {:<34} {:>8.1} ms", "mekara tools list (3 servers)", l);
    println!(
        "   {:<34} {:>8.1} ms",
        "slowest of 3 start-ups, one by one", alone
    );
    println!(
        "   above the slowest start-up: {:.1} ms (target ≤ {TARGET_LIST_EXTRA_MS} ms): {}",
        extra,
        verdict(extra, TARGET_LIST_EXTRA_MS, "ms", 1)
    );
}

fn call_overhead(runtime: &tokio::runtime::Runtime, root: &Path, everything: &Path) {
    let client = McpClient::with_trust(Some(root), None, true);
    let cancel = CancelToken::default();
    let mut args = Map::new();
    args.insert("message".into(), Json::String("hello".into()));

    let bare = runtime.block_on(async {
        let mut cmd = tokio::process::Command::new("node");
        cmd.arg(everything).arg("stdio");
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        ().serve(transport).await.expect("handshake")
    });
    let params = CallToolRequestParams::new("echo").with_arguments(args.clone());

    let mut mekara_ms = Vec::with_capacity(CALLS);
    let mut bare_ms = Vec::with_capacity(CALLS);
    for i in 0..WARM_UP_CALLS + CALLS {
        let t = Instant::now();
        let out = client
            .call("everything", "echo", args.clone(), None, &cancel)
            .expect("mekara call");
        let m = t.elapsed();
        assert_eq!(out.text, "Echo: hello");
        let t = Instant::now();
        let r = runtime
            .block_on(bare.peer().call_tool(params.clone()))
            .expect("bare call");
        let b = t.elapsed();
        assert!(!r.content.is_empty());
        if i >= WARM_UP_CALLS {
            mekara_ms.push(ms(m));
            bare_ms.push(ms(b));
        }
    }
    let (m, b) = (median(&mekara_ms), median(&bare_ms));
    let overhead = m - b;
    println!("1. one warm tools/call (`echo`), median of {CALLS}:");
    println!("   {:<34} {:>8.3} ms", "mekara client (McpClient::call)", m);
    println!("   {:<34} {:>8.3} ms", "bare rmcp client", b);
    println!(
        "   overhead {:.3} ms (target ≤ {TARGET_OVERHEAD_MS} ms): {}",
        overhead,
        verdict(overhead, TARGET_OVERHEAD_MS, "ms", 3)
    );
    drop(client);
    runtime.block_on(async {
        let _ = bare.cancel().await;
    });
}

/// Spawn, handshake and `tools/list` of one stdio server (`program ARGS`) with the bare rmcp
/// client.
async fn start_up(program: &Path, args: &[&Path]) -> Duration {
    let t = Instant::now();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let service = ().serve(transport).await.expect("handshake");
    service.peer().list_all_tools().await.expect("tools/list");
    let took = t.elapsed();
    let _ = service.cancel().await;
    took
}

// Short names for the figures of one round, read beside the table they fill.
#[allow(clippy::many_single_char_names)]
fn listing(
    runtime: &tokio::runtime::Runtime,
    root: &Path,
    everything: &Path,
    filesystem: &Path,
    data: &Path,
) {
    let mekara = PathBuf::from(env!("CARGO_BIN_EXE_mekara"));
    let stdio = Path::new("stdio");
    let mut list_ms = Vec::new();
    let mut everything_ms = Vec::new();
    let mut fs_ms = Vec::new();
    let mut parallel_ms = Vec::new();
    // one unmeasured round first: the file cache, node's compile cache
    for round in 0..=LIST_RUNS {
        let t = Instant::now();
        let out = Command::new(&mekara)
            .args(["tools", "list", "--trust"])
            .current_dir(root)
            .env("HOME", root)
            .stderr(std::process::Stdio::null())
            .output()
            .expect("run mekara");
        let l = t.elapsed();
        assert!(out.status.success(), "mekara tools list failed");
        let (e_args, f_args) = ([everything, stdio], [filesystem, data]);
        let node = Path::new("node");
        let e = runtime.block_on(start_up(node, &e_args));
        let f = runtime.block_on(start_up(node, &f_args));
        // The last of the three to answer `tools/list`, not counting their shutdown.
        let (a, b, c) = runtime.block_on(async {
            futures::join!(
                start_up(node, &e_args),
                start_up(node, &e_args),
                start_up(node, &f_args)
            )
        });
        let p = a.max(b).max(c);
        if round > 0 {
            list_ms.push(ms(l));
            everything_ms.push(ms(e));
            fs_ms.push(ms(f));
            parallel_ms.push(ms(p));
        }
    }
    let (l, e, f) = (median(&list_ms), median(&everything_ms), median(&fs_ms));
    let slowest = e.max(f);
    let extra = l - slowest;
    println!("2. listing the tools of 3 stdio servers, median of {LIST_RUNS}:");
    println!("   {:<34} {:>8.1} ms", "mekara tools list (3 servers)", l);
    println!("   {:<34} {:>8.1} ms", "server-everything start-up", e);
    println!("   {:<34} {:>8.1} ms", "server-filesystem start-up", f);
    let par = median(&parallel_ms);
    println!("   {:<34} {:>8.1} ms", "bare rmcp, same 3 in parallel", par);
    println!(
        "   above the slowest start-up alone: {:.1} ms (target ≤ {TARGET_LIST_EXTRA_MS} ms): {}",
        extra,
        verdict(extra, TARGET_LIST_EXTRA_MS, "ms", 1)
    );
    let extra_par = l - par;
    println!(
        "   above the same 3 started in parallel: {:.1} ms (target ≤ {TARGET_LIST_EXTRA_MS} ms): {}",
        extra_par,
        verdict(extra_par, TARGET_LIST_EXTRA_MS, "ms", 1)
    );
    println!(
        "   (node start-up is CPU-bound: on a machine with fewer free cores than servers, three\n    \
         servers starting together take longer than the slowest alone, whoever starts them)"
    );
}
