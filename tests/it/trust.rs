//! What a cloned repository may make mekara do (docs/design.md, "What a cloned repository
//! may make mekara do"): a project's `.mekara/config.toml` never expands the environment
//! into a destination it chose. The destination here is a listener on 127.0.0.1 that
//! answers as a PostgreSQL server asking for the password in clear text, so a test sees
//! whether a connection came and what password it carried.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::common::{Project, run_with_stdin};
use crate::mcp::client::Client;

const SECRET: &str = "tok-5ecret-in-env";

/// A fake PostgreSQL server on 127.0.0.1: each connection gets a request for the password
/// in clear text, and what it sends (the startup message, then the password) is kept.
struct Listener {
    port: u16,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Listener {
    fn start() -> Listener {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let kept = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let mut bytes = Vec::new();
                let mut buf = [0u8; 1024];
                // The startup message, then (after `AuthenticationCleartextPassword`) the
                // password message.
                for answer in [&b"R\0\0\0\x08\0\0\0\x03"[..], &b""[..]] {
                    let Ok(n) = stream.read(&mut buf) else { break };
                    bytes.extend_from_slice(&buf[..n]);
                    if n == 0 || stream.write_all(answer).is_err() {
                        break;
                    }
                }
                kept.lock().expect("lock").push(bytes);
            }
        });
        Listener { port, received }
    }

    /// The URL of this listener with the password `${SECRET_TOKEN}`.
    fn url(&self) -> String {
        format!("postgres://u:${{SECRET_TOKEN}}@127.0.0.1:{}/db", self.port)
    }

    /// How many connections came, and whether any carried the secret.
    fn seen(&self) -> (usize, bool) {
        // A connection in flight is given the time to be recorded.
        std::thread::sleep(Duration::from_millis(100));
        let received = self.received.lock().expect("lock");
        let secret = received
            .iter()
            .any(|b| String::from_utf8_lossy(b).contains(SECRET));
        (received.len(), secret)
    }
}

/// A project whose `.mekara/config.toml` (a cloned repository's) names `listener` as its
/// store, with the password from `${SECRET_TOKEN}`, and a one-step script `steps`.
fn hostile(listener: &Listener) -> Project {
    let project = Project::new();
    project.write(
        ".mekara/config.toml",
        &format!("[store]\nurl = \"{}\"\n", listener.url()),
    );
    project.script(
        "steps",
        "Run a step.",
        Some("def execute(request):\n    auto(\"echo a\")\n"),
    );
    project
}

#[test]
fn a_project_config_that_expands_the_environment_into_its_store_url_is_refused() {
    let listener = Listener::start();
    let project = hostile(&listener);
    for args in [&["runs"][..], &["run", "steps"]] {
        let mut cmd = project.command(args);
        cmd.env("SECRET_TOKEN", SECRET);
        let run = run_with_stdin(cmd, "");
        run.expect_code(2);
        assert!(
            run.stderr
                .contains("names the environment variable `SECRET_TOKEN`"),
            "{args:?}: {}",
            run.stderr
        );
    }
    let mut cmd = project.command(&["runs"]);
    cmd.env("SECRET_TOKEN", SECRET);
    mekara_snapshot!(project, cmd);
    assert_eq!(listener.seen(), (0, false), "nothing reached the listener");
}

#[tokio::test]
async fn the_mcp_tools_refuse_it_too() {
    let listener = Listener::start();
    let project = hostile(&listener);
    let secret = std::path::Path::new(SECRET);
    let client = Client::start(&project, &[("SECRET_TOKEN", secret)]).await;
    let mut replies = String::new();
    for (tool, arguments) in [
        ("start", json!({"name": "steps"})),
        ("resume", json!({})),
        ("status", json!({})),
    ] {
        let reply = client.call(tool, arguments).await;
        replies.push_str(&format!("> {tool}\n{}\n", reply.text));
    }
    insta::assert_snapshot!(project.scrub(&replies));
    assert_eq!(listener.seen(), (0, false), "nothing reached the listener");
}

#[test]
fn the_persons_own_config_still_expands_the_environment() {
    let listener = Listener::start();
    let project = hostile(&listener);
    crate::common::write_file(
        &project.home().join(".mekara/config.toml"),
        &format!("[store]\nurl = \"{}\"\n", listener.url()),
    );
    let mut cmd = project.command(&["runs"]);
    cmd.env("SECRET_TOKEN", SECRET);
    let run = run_with_stdin(cmd, "");
    // The listener is no PostgreSQL server: the run store is unreachable, after the login.
    run.expect_code(1);
    assert!(!run.stderr.contains(SECRET), "{}", run.stderr);
    let (connections, secret) = listener.seen();
    assert!(
        connections > 0 && secret,
        "the person's URL was used, with the variable's value"
    );
}

/// A store off this machine is reached only over TLS: `sslmode=disable` is refused before
/// anything is looked up or sent (`db.invalid` is never resolved); a CA file that cannot be
/// read is refused before connecting too.
#[test]
fn a_store_off_this_machine_without_tls_is_refused_before_connecting() {
    let project = Project::new();
    let runs = |url: &str| {
        let mut cmd = project.command(&["runs"]);
        cmd.env("MEKARA_STORE_URL", url);
        cmd
    };
    mekara_snapshot!(
        project,
        runs("postgres://u:pw-in-url@db.invalid:5432/runs?sslmode=disable")
    );
    mekara_snapshot!(
        "no_ca_file",
        project,
        runs("postgres://u@db.invalid/runs?sslrootcert=/nonexistent/ca.pem")
    );
}
