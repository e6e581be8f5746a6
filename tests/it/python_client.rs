//! `mekara mcp` and `mekara serve` driven by an independent client: the official Python MCP
//! SDK, over stdio and Streamable HTTP (`tests/python/drive_mekara.py` and
//! `tests/python/drive_serve.py` hold the checks).
//!
//! The client lives in a virtualenv that `tests/python/install.sh` creates at
//! `target/test-clients/py`. The tests are ignored unless the `clients` feature is on (as in
//! CI); with it on, a missing virtualenv is a failure.

use std::path::PathBuf;
use std::process::Command;

use crate::common::{Project, Run};

#[cfg_attr(not(feature = "clients"), ignore = "needs the Python MCP SDK")]
#[test]
fn python_sdk_client_drives_the_server_over_stdio_and_http() {
    drive(
        "drive_mekara.py",
        &[],
        "python mcp client: all checks passed",
    );
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the Python MCP SDK")]
#[test]
fn python_sdk_client_lists_and_calls_served_tools_over_stdio_and_http() {
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/tools");
    drive(
        "drive_serve.py",
        &[examples.to_str().expect("a UTF-8 path")],
        "python mcp client: all serve checks passed",
    );
}

/// Runs `tests/python/SCRIPT MEKARA PROJECT ARGS...` with the venv's Python in a fresh
/// project, and checks that it exits 0 having printed `done`.
fn drive(script: &str, args: &[&str], done: &str) {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = crate::common::outside_client(
        "py/bin/python",
        "the Python MCP SDK",
        "tests/python/install.sh",
    );

    let project = Project::new();
    let out = Command::new(&python)
        .arg(manifest.join("tests/python").join(script))
        .arg(env!("CARGO_BIN_EXE_mekara"))
        .arg(project.root())
        .args(args)
        .current_dir(project.root())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", project.home())
        .env("NO_COLOR", "1")
        .env("LANG", "C.UTF-8")
        .output()
        .expect("spawn the venv's python");
    let run = Run::from_output(out);
    println!("{}", run.stdout);
    run.expect_code(0);
    assert!(
        run.stdout.contains(done),
        "the driver exited 0 without finishing:\n{}\n{}",
        run.stdout,
        run.stderr
    );
}
