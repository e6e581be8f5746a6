//! The shared run store in PostgreSQL: a real server (the Debian `postgresql` package),
//! started once for the test process by [`server`], one database per test. Hosts are
//! simulated by checkouts: each [`Project`] is its own folder and HOME, with its own
//! `MEKARA_HOST`.

use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{Project, Run, run_with_stdin, wait_for};

const BIN: &str = "/usr/lib/postgresql/15/bin";
const PASSWORD: &str = "pg-s3cret-pw";
const NEEDS: &str = "needs PostgreSQL 15 (`apt-get install postgresql`)";

/// The role that the server lets in only over TLS (`hostnossl … reject` in `pg_hba.conf`).
const TLS_ONLY: &str = "tls_only";

/// One PostgreSQL server for the whole test process, on a free loopback port, its data and
/// socket in a temporary folder. It runs as `nobody` (initdb refuses root) under a shell
/// that stops it and removes the folder when this process's end closes its stdin. It
/// speaks TLS too, with a certificate for `localhost` and `127.0.0.1` signed by the CA in
/// `ca`, and lets [`TLS_ONLY`] in over TLS only.
struct Server {
    port: u16,
    ca: std::path::PathBuf,
    _keeper: Child,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        assert!(
            std::path::Path::new(BIN).join("initdb").exists(),
            "{NEEDS}: {BIN}/initdb is missing"
        );
        let dir = tempfile::Builder::new()
            .prefix("mekara-pg")
            .tempdir()
            .expect("tempdir")
            .keep();
        std::fs::write(dir.join("pw"), PASSWORD).expect("pw");
        let as_nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
        let root = nix_is_root();
        if root {
            for path in [dir.clone(), dir.join("pw")] {
                std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown");
            }
        }
        let mut initdb = Command::new(if root { "setpriv" } else { "env" });
        if root {
            initdb.args(as_nobody);
        }
        let out = initdb
            .arg(format!("{BIN}/initdb"))
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-U", "mekara", "--auth=scram-sha-256", "--no-sync"])
            .arg(format!("--pwfile={}", dir.join("pw").display()))
            .output()
            .expect("initdb");
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (ca, cert, key) = crate::mcp_client::certificates(&dir);
        if root {
            for path in [&cert, &key] {
                std::os::unix::fs::chown(path, Some(65534), Some(65534)).expect("chown");
            }
        }
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod key");
        let hba = dir.join("data/pg_hba.conf");
        let rules = std::fs::read_to_string(&hba).expect("pg_hba.conf");
        std::fs::write(&hba, format!("hostnossl all {TLS_ONLY} all reject\n{rules}"))
            .expect("pg_hba.conf");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let run_as = if root {
            format!("setpriv {}", as_nobody.join(" "))
        } else {
            "env".to_string()
        };
        let d = dir.display();
        let (cert, key) = (cert.display(), key.display());
        let keeper = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "{run_as} {BIN}/postgres -D {d}/data -p {port} -k {d} -c listen_addresses=127.0.0.1 \
                 -c fsync=off -c max_connections=200 -c ssl=on -c ssl_cert_file={cert} -c ssl_key_file={key} >{d}/log 2>&1 & p=$!; read _; kill -INT $p; wait $p; rm -rf {d}"
            ))
            .stdin(Stdio::piped())
            .spawn()
            .expect("start postgres");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while connect("postgres", port).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "postgres did not start: {}",
                std::fs::read_to_string(dir.join("log")).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        connect("postgres", port)
            .expect("connect")
            .batch_execute(&format!(
                "CREATE ROLE {TLS_ONLY} LOGIN PASSWORD '{PASSWORD}'"
            ))
            .expect("create role");
        Server {
            port,
            ca,
            _keeper: keeper,
        }
    })
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn connect(db: &str, port: u16) -> Result<postgres::Client, postgres::Error> {
    postgres::Client::connect(
        &format!("postgres://mekara:{PASSWORD}@127.0.0.1:{port}/{db}"),
        postgres::NoTls,
    )
}

/// A fresh database of the shared server for one test.
pub(crate) struct Db {
    name: String,
    port: u16,
}

impl Db {
    /// A new, empty database (no mekara schema).
    pub(crate) fn empty() -> Db {
        static N: AtomicUsize = AtomicUsize::new(0);
        let port = server().port;
        let name = format!(
            "t{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        connect("postgres", port)
            .expect("connect")
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create database");
        Db { name, port }
    }

    /// A new database, migrated by `mekara store migrate` (run in `project`).
    pub(crate) fn migrated(project: &Project) -> Db {
        let db = Db::empty();
        let mut cmd = project.command(&["store", "migrate"]);
        cmd.env("MEKARA_STORE_URL", db.url());
        run_with_stdin(cmd, "").expect_code(0);
        db
    }

    pub(crate) fn url(&self) -> String {
        format!(
            "postgres://mekara:{PASSWORD}@127.0.0.1:{}/{}",
            self.port, self.name
        )
    }

    pub(crate) fn client(&self) -> postgres::Client {
        connect(&self.name, self.port).expect("connect")
    }

    /// Host `name`: a checkout of its own (`project`, its own folder and HOME) using this
    /// store, as `MEKARA_HOST=name` and `USER=u-name`.
    pub(crate) fn host(&self, name: &str, project: Project) -> Host {
        Host {
            url: self.url(),
            name: name.to_string(),
            project,
        }
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        self.client()
            .query("SELECT id FROM mekara_runs ORDER BY id", &[])
            .expect("ids")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

/// A simulated host: a checkout of the project of its own (folder and HOME), on the
/// shared store.
pub(crate) struct Host {
    url: String,
    pub name: String,
    pub project: Project,
}

impl Host {
    /// `mekara ARGS` on this host (`MEKARA_HOST=NAME`, `USER=u-NAME`).
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.project.command(args);
        cmd.env("MEKARA_STORE_URL", &self.url)
            .env("MEKARA_HOST", &self.name)
            .env("USER", format!("u-{}", self.name));
        cmd
    }

    /// `mekara ARGS` on this host, run to its end with nothing on stdin.
    pub(crate) fn run(&self, args: &[&str]) -> Run {
        run_with_stdin(self.command(args), "")
    }

    /// What a person saw of `run` on this host, as [`Project::transcript`] writes it, with
    /// the store's address written `127.0.0.1:[PORT]/[DB]` (both change with each test
    /// process) and the folder `shared` of [`checkout`] as `[SHARED]`.
    pub(crate) fn transcript(&self, run: &Run, shared: Option<&std::path::Path>) -> String {
        let mut text = self.project.transcript(run);
        if let Some((_, address)) = self.url.rsplit_once('@') {
            text = text.replace(address, "127.0.0.1:[PORT]/[DB]");
        }
        if let Some(shared) = shared {
            text = text.replace(&shared.display().to_string(), "[SHARED]");
        }
        text
    }
}

/// A checkout of the project `acme` (the id comes from `[store] project`), with a script
/// that writes to `shared` (a folder both hosts see): `a`, then `b` (which waits for
/// `shared/go` when `shared/wait` exists), then `c`.
fn checkout(shared: &std::path::Path) -> Project {
    let project = Project::new();
    project.write(".mekara/config.toml", "[store]\nproject = \"acme\"\n");
    let s = shared.display();
    project.script(
        "steps",
        "Run the steps.",
        Some(&format!(
            r#"def execute(request):
    auto("echo a >> {s}/a.count", context = "a")
    auto("touch {s}/started; while [ -e {s}/wait ] && [ ! -e {s}/go ]; do sleep 0.02; done; echo b >> {s}/b.count", context = "b")
    auto("echo c >> {s}/c.count", context = "c")
"#
        )),
    );
    project
}

/// A migrated store and two hosts with a checkout of `acme` each: `laptop` and `ci`.
fn laptop_and_ci(shared: &std::path::Path) -> (Db, Host, Host) {
    let laptop = checkout(shared);
    let db = Db::migrated(&laptop);
    let (laptop, ci) = (db.host("laptop", laptop), db.host("ci", checkout(shared)));
    (db, laptop, ci)
}

/// [`laptop_and_ci`], with `laptop` driving `steps` and waiting in step `b` until
/// `shared/go` appears.
fn driving_step_b(shared: &std::path::Path) -> (Host, Host, Db, Child) {
    let (db, laptop, ci) = laptop_and_ci(shared);
    std::fs::write(shared.join("wait"), "").expect("wait");
    let child = laptop
        .command(&["run", "steps"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for(&shared.join("started"));
    (laptop, ci, db, child)
}

fn count(shared: &std::path::Path, name: &str) -> usize {
    crate::common::lines(&shared.join(format!("{name}.count")))
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_run_in_postgres_is_listed_and_shown_from_another_host() {
    let shared = tempfile::tempdir().expect("tempdir");
    let (db, laptop, ci) = laptop_and_ci(shared.path());
    laptop.run(&["run", "steps"]).expect_code(0);
    assert!(
        !laptop
            .project
            .root()
            .join(".mekara/runs")
            .read_dir()
            .is_ok_and(|mut d| d
                .any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "jsonl")))),
        "no journal file: the run is in the database"
    );
    let ids = db.ids();
    assert_eq!(ids.len(), 1);

    let listed = ci.run(&["runs"]);
    listed.expect_code(0);
    assert_eq!(first_listed(&listed), Some(ids[0].as_str()));
    insta::assert_snapshot!("listed_from_another_host", ci.transcript(&listed, None));
    assert!(!listed.stdout.contains(PASSWORD), "{}", listed.stdout);

    let shown = ci.run(&["runs", "show", &ids[0]]);
    shown.expect_code(0);
    insta::assert_snapshot!(
        "shown_from_another_host",
        ci.transcript(&shown, Some(shared.path()))
            .replace(&laptop.project.root().display().to_string(), "[LAPTOP]")
    );

    let mut filtered = String::new();
    for (filter, found) in [
        (&["--host", "laptop"][..], true),
        (&["--host", "ci"], false),
        (&["--user", "u-laptop"], true),
        (&["--user", "u-ci"], false),
        (&["--state", "completed"], true),
        (&["--state", "interrupted"], false),
    ] {
        let args: Vec<&str> = ["runs"].iter().chain(filter).copied().collect();
        let out = ci.run(&args);
        out.expect_code(0);
        assert_eq!(
            out.stdout.contains(&ids[0]),
            found,
            "{filter:?}: {}",
            out.stdout
        );
        filtered.push_str(&format!(
            "$ mekara {}\n{}",
            args.join(" "),
            ci.transcript(&out, None)
        ));
    }
    insta::assert_snapshot!("listed_by_host_user_and_state", filtered);

    // `--limit` reads the newest runs only and counts the others.
    laptop.run(&["run", "steps"]).expect_code(0);
    // Newest by when it started, whatever the ids' random ends say.
    let newer = db
        .ids()
        .into_iter()
        .find(|id| *id != ids[0])
        .expect("the second run");
    let limited = ci.run(&["runs", "--limit", "1"]);
    limited.expect_code(0);
    assert_eq!(first_listed(&limited), Some(newer.as_str()));
    insta::assert_snapshot!("listed_with_a_limit", ci.transcript(&limited, None));
}

/// The id of the first run `mekara runs` listed (the row under the header).
fn first_listed(listed: &Run) -> Option<&str> {
    listed.stdout.lines().nth(1)?.split_whitespace().next()
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn the_url_in_the_persons_config_toml_expands_variables_and_files_refuse_host_filters() {
    let shared = tempfile::tempdir().expect("tempdir");
    let project = checkout(shared.path());
    let db = Db::migrated(&project);
    crate::common::write_file(
        &project.home().join(".mekara/config.toml"),
        &format!(
            "[store]\nurl = \"postgres://mekara:${{PG_PW}}@127.0.0.1:{}/{}\"\n",
            db.port, db.name
        ),
    );
    let mut cmd = project.command(&["run", "steps"]);
    cmd.env("PG_PW", PASSWORD);
    run_with_stdin(cmd, "").expect_code(0);
    assert_eq!(db.ids().len(), 1, "the run went to the database");

    let mut cmd = project.command(&["runs"]);
    cmd.env_remove("PG_PW");
    let unset = mekara_snapshot!("a_variable_not_set", project, cmd);
    unset.expect_code(2);

    let files = Project::new();
    let refused = mekara_snapshot!(
        "host_filters_of_file_runs",
        files,
        files.command(&["runs", "--host", "ci"])
    );
    refused.expect_code(2);
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn sigkill_mid_run_then_resume_from_another_checkout_runs_no_finished_step_twice() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let (laptop, ci, db, mut child) = driving_step_b(s);
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let ids = db.ids();
    let listed = ci.run(&["runs", "--state", "interrupted"]);
    assert_eq!(first_listed(&listed), Some(ids[0].as_str()));

    // The killed laptop's step still waits; the other host cannot reach it (the group
    // note is host-local), so the test lets it end.
    std::fs::write(s.join("go"), "").expect("go");
    let resumed = ci.run(&["run", "--resume", &ids[0]]);
    resumed.expect_code(0);
    assert_eq!(count(s, "a"), 1, "the finished step `a` ran once");
    assert_eq!(count(s, "c"), 1);
    assert!(!resumed.stdout.contains("steps[0]"), "{}", resumed.stdout);
    insta::assert_snapshot!(
        "resumed_from_another_checkout",
        ci.transcript(&resumed, Some(s))
    );
    let listed = laptop.run(&["runs"]);
    insta::assert_snapshot!(
        "completed_from_another_checkout",
        laptop.transcript(&listed, None)
    );
}

/// Regression: when the store held the new run's header back with its first steps, the
/// step note undercounted the journal, so a resume on the same host took the killed run's
/// step for a finished one and left it running beside the step's second run.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn sigkill_mid_step_then_resume_on_the_same_host_kills_the_leftover_step() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let (laptop, _ci, db, mut child) = driving_step_b(s);
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let ids = db.ids();
    // The killed run's `b` still waits for `go`; the resume must end it before it runs `b`
    // again, or both copies write when `go` comes.
    let resumed = laptop
        .command(&["run", "--resume", &ids[0]])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    std::fs::remove_file(s.join("started")).expect("started");
    wait_for(&s.join("started"));
    std::fs::write(s.join("go"), "").expect("go");
    let mut resumed = resumed;
    assert!(resumed.wait().expect("wait").success());
    // Time for a leftover `b` to see `go` and write, if one were still there.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!((count(s, "a"), count(s, "b"), count(s, "c")), (1, 1, 1));
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_run_one_host_drives_is_refused_to_another_and_listed_active() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let (_laptop, ci, db, mut child) = driving_step_b(s);
    let ids = db.ids();
    let refused = ci.run(&["run", "--resume", &ids[0]]);
    refused.expect_code(1);
    insta::assert_snapshot!("refused_to_another_host", ci.transcript(&refused, Some(s)));
    let listed = ci.run(&["runs"]);
    insta::assert_snapshot!("listed_active", ci.transcript(&listed, None));
    let removed = ci.run(&["runs", "prune", "--state", "interrupted"]);
    assert!(
        !removed.stdout.contains("removed 1"),
        "an active run is never pruned: {}",
        removed.stdout
    );
    std::fs::write(s.join("go"), "").expect("go");
    assert!(child.wait().expect("wait").success());
    assert_eq!((count(s, "a"), count(s, "b"), count(s, "c")), (1, 1, 1));
    let listed = ci.run(&["runs"]);
    insta::assert_snapshot!(
        "listed_completed_after_it_was_active",
        ci.transcript(&listed, None)
    );
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn the_schema_is_checked_older_and_newer_with_what_to_do() {
    let db = Db::empty();
    let a = db.host("a", Project::new());
    let old = a.run(&["runs"]);
    old.expect_code(1);
    let shown = format!("postgres://mekara:***@127.0.0.1:{}/{}", db.port, db.name);
    assert_eq!(
        old.stderr.trim_end(),
        format!(
            "error: the run store `{shown}` has schema version 0 and this mekara needs version 3: run `mekara store migrate`"
        )
    );
    let migrated = a.run(&["store", "migrate"]);
    migrated.expect_code(0);
    insta::assert_snapshot!("migrated", a.transcript(&migrated, None));
    let again = a.run(&["store", "migrate"]);
    insta::assert_snapshot!("migrated_already", a.transcript(&again, None));
    a.run(&["runs"]).expect_code(0);

    db.client()
        .batch_execute("UPDATE mekara_schema SET version = 7")
        .expect("update");
    let newer = a.run(&["runs"]);
    newer.expect_code(1);
    assert_eq!(
        newer.stderr.trim_end(),
        format!(
            "error: the run store `{shown}` has schema version 7, newer than this mekara's (3), so a newer mekara migrated it; upgrade mekara to use it"
        )
    );
    let refused = a.run(&["store", "migrate"]);
    refused.expect_code(1);
    insta::assert_snapshot!("a_newer_schema_not_migrated", a.transcript(&refused, None));
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn import_then_export_round_trips_journals_byte_for_byte() {
    let shared = tempfile::tempdir().expect("tempdir");
    let (laptop, other) = (checkout(shared.path()), checkout(shared.path()));
    // Two runs in files, one of which was rewound (a supersede event and superseded lines).
    laptop.run(&["run", "steps"], "").expect_code(0);
    laptop.run(&["run", "steps"], "").expect_code(0);
    let ids = laptop.run_ids();
    laptop
        .run(&["run", "--resume", &ids[1], "--from", "steps[1]"], "")
        .expect_code(0);
    let files = laptop.runs_snapshot();
    assert!(
        files
            .values()
            .any(|j| String::from_utf8_lossy(j).contains("\"supersede\""))
    );

    let db = Db::migrated(&laptop);
    let (laptop, other) = (db.host("laptop", laptop), db.host("other", other));
    let imported = laptop.run(&["store", "import"]);
    imported.expect_code(0);
    assert_eq!(
        imported.stdout,
        "imported 2 runs; 0 runs already in the store\n"
    );
    let again = laptop.run(&["store", "import"]);
    assert_eq!(
        again.stdout,
        "imported 0 runs; 2 runs already in the store\n"
    );
    // `db.ids()` are in the order of the ids, `run_ids` in the order the runs started.
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(db.ids(), sorted);

    let exported = other.run(&["store", "export"]);
    exported.expect_code(0);
    assert_eq!(
        exported.stdout,
        "exported 2 runs; 0 runs already a file here\n"
    );
    assert_eq!(
        other.project.runs_snapshot(),
        files,
        "byte-identical journals"
    );
    let shown = other.run(&["runs", "show", &ids[1]]);
    insta::assert_snapshot!(
        "a_rewound_run_exported",
        other
            .transcript(&shown, Some(shared.path()))
            .replace(&laptop.project.root().display().to_string(), "[LAPTOP]")
    );
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_bad_url_or_a_server_that_is_down_is_a_clear_error_without_the_password() {
    let project = Project::new();
    let port = server().port;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    for (url, says) in [
        (
            format!("postgres://mekara:{PASSWORD}@127.0.0.1:{closed}/x"),
            format!(
                "error: cannot reach the run store `postgres://mekara:***@127.0.0.1:{closed}/x`: error connecting to server: Connection refused"
            ),
        ),
        (
            format!("postgres://mekara:wrong-{PASSWORD}@127.0.0.1:{port}/postgres"),
            format!(
                "error: cannot reach the run store `postgres://mekara:***@127.0.0.1:{port}/postgres`: password authentication failed for user \"mekara\""
            ),
        ),
        (
            format!("postgres://mekara:{PASSWORD}@127.0.0.1:notaport/x"),
            "error: the run store setting `MEKARA_STORE_URL` is not a PostgreSQL URL".to_string(),
        ),
    ] {
        let mut cmd = project.command(&["runs"]);
        cmd.env("MEKARA_STORE_URL", &url);
        let started = std::time::Instant::now();
        let out = run_with_stdin(cmd, "");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "no hang"
        );
        assert_ne!(out.code, Some(0));
        assert!(out.stderr.starts_with(&says), "{url}:\n{}", out.stderr);
        assert!(!out.stderr.contains(PASSWORD), "{}", out.stderr);
    }
    // A host that never answers: the connect timeout of the URL (or 5 s) ends the wait.
    let mut cmd = project.command(&["runs"]);
    cmd.env(
        "MEKARA_STORE_URL",
        format!("postgres://mekara:{PASSWORD}@10.255.255.1:5432/x?connect_timeout=1"),
    );
    let out = run_with_stdin(cmd, "");
    assert_ne!(out.code, Some(0));
    // Not pinned: what ends the wait (a timeout, or whatever answers for that address on
    // this network) differs between machines.
    assert!(
        out.stderr.contains("cannot reach the run store"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(PASSWORD), "{}", out.stderr);

    let mut cmd = project.command(&["store", "--help"]);
    cmd.env(
        "MEKARA_STORE_URL",
        format!("postgres://mekara:{PASSWORD}@h/x"),
    );
    let help = run_with_stdin(cmd, "");
    help.expect_code(0);
    assert!(!help.stdout.contains(PASSWORD), "{}", help.stdout);
}

/// One MCP call to a `mekara mcp` of its own, in `project` as host `host`.
async fn mcp_once(
    project: &Project,
    db: &Db,
    host: &str,
    tool: &str,
    args: serde_json::Value,
) -> String {
    let (url, user) = (db.url(), format!("u-{host}"));
    let env = [
        ("MEKARA_STORE_URL", std::path::Path::new(&url)),
        ("MEKARA_HOST", std::path::Path::new(host)),
        ("USER", std::path::Path::new(&user)),
    ];
    let client = crate::mcp::client::Client::start(project, &env).await;
    let reply = client.call(tool, args).await.ok();
    client.service.cancel().await.expect("close");
    reply
}

/// Runs `future` to its end on a runtime of its own.
fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// Over MCP: a run started by the agent of one host is carried to its end, by its handle,
/// by a server on another host, each call through a server process of its own.
///
/// Not a `tokio::test`: the test's own calls to the database use the synchronous client,
/// which cannot run inside a runtime; the MCP calls get one each.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn mcp_servers_on_two_hosts_carry_one_run_by_its_handle() {
    use serde_json::json;
    let (laptop, ci) = (Project::new(), Project::new());
    for project in [&laptop, &ci] {
        crate::mcp::handles::two_steps(project);
        project.write(".mekara/config.toml", "[store]\nproject = \"acme\"\n");
    }
    let db = Db::migrated(&laptop);
    let started = block_on(mcp_once(
        &laptop,
        &db,
        "laptop",
        "start",
        json!({"name": "two", "arguments": "p"}),
    ));
    let h = crate::mcp::client::handle(&started);
    let second = block_on(mcp_once(
        &ci,
        &db,
        "ci",
        "continue_compiled_script",
        json!({"run_id": h, "outputs": {"word": "one"}}),
    ));
    insta::assert_snapshot!("carried_by_the_other_host", laptop.scrub(&second));
    let done = block_on(mcp_once(
        &laptop,
        &db,
        "laptop",
        "continue_compiled_script",
        json!({"run_id": h, "outputs": {"word": "two"}}),
    ));
    insta::assert_snapshot!("done_on_the_first_host", laptop.scrub(&done));
    let out = std::fs::read_to_string(laptop.root().join("out-p")).expect("output");
    assert_eq!(out, "one\ntwo\n");
    let ci = db.host("ci", ci);
    let listed = ci.run(&["runs"]);
    insta::assert_snapshot!("carried_by_two_hosts", ci.transcript(&listed, None));
}

/// `--state` chooses among file runs too (no database needed).
#[test]
fn runs_state_filters_file_runs_too() {
    let project = Project::new();
    project.script(
        "one",
        "One step.",
        Some("def execute(request):\n    auto(\"true\")\n"),
    );
    project.run(&["run", "one"], "").expect_code(0);
    let id = &project.run_ids()[0];
    mekara_snapshot!(project, project.run(&["runs", "--state", "completed"], ""));
    let interrupted = mekara_snapshot!(
        "no_file_run_interrupted",
        project,
        project.run(&["runs", "--state", "interrupted"], "")
    );
    assert!(
        !interrupted.stdout.contains(id.as_str()),
        "{}",
        interrupted.stdout
    );
}

/// `status` over MCP reads the events of the runs that may still be going on only: a run
/// whose last event ends it is passed over on its last line, however long its history.
/// Shown by spoiling the middle of two completed runs: `mekara runs`, which reads them,
/// reports them unreadable, while `status` names only the interrupted run.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn status_reads_only_the_runs_whose_last_event_does_not_end_them() {
    use serde_json::json;
    let project = Project::new();
    crate::mcp::handles::two_steps(&project);
    project.script(
        "one",
        "One step.",
        Some("def execute(request):\n    auto(\"true\")\n"),
    );
    project.write(".mekara/config.toml", "[store]\nproject = \"acme\"\n");
    let db = Db::migrated(&project);
    let host = db.host("laptop", project);
    host.run(&["run", "one"]).expect_code(0);
    host.run(&["run", "one"]).expect_code(0);
    let completed = db.ids();
    // Stdin closed at the first llm step: the run is left to resume.
    host.run(&["run", "two", "w"]);
    let interrupted = db
        .ids()
        .into_iter()
        .find(|id| !completed.contains(id))
        .expect("the interrupted run");
    db.client()
        .execute(
            "UPDATE mekara_events SET body = '{\"event\": \"spoiled\"}' \
             WHERE line = 2 AND run_id = ANY($1)",
            &[&completed],
        )
        .expect("spoil");
    let listed = host.run(&["runs"]);
    // Rows of runs started in one second are in the order of their ids' random ends:
    // sorted to pin, after the rest.
    let text = host.transcript(&listed, None);
    let (mut rows, rest): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| l.starts_with("[RUN]"));
    rows.sort_unstable();
    insta::assert_snapshot!(
        "spoiled_runs_listed",
        format!("{}\n{}", rest.join("\n"), rows.join("\n"))
    );
    let status = block_on(mcp_once(&host.project, &db, "laptop", "status", json!({})));
    assert!(status.contains(&interrupted), "{status}");
    for id in &completed {
        assert!(!status.contains(id.as_str()), "{status}");
    }
}

/// A store reached over TLS (`sslmode=verify-full`): the server lets the role in only over
/// TLS, so runs that reach it prove TLS was used; the certificate is checked against
/// `sslrootcert`, and without it the store is refused as untrusted.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_store_reached_over_tls_checks_the_servers_certificate() {
    let shared = tempfile::tempdir().expect("tempdir");
    let project = checkout(shared.path());
    let db = Db::empty();
    db.client()
        .batch_execute(&format!("ALTER DATABASE {} OWNER TO {TLS_ONLY}", db.name))
        .expect("owner");
    let plain = format!(
        "postgres://{TLS_ONLY}:{PASSWORD}@127.0.0.1:{}/{}",
        db.port, db.name
    );
    let ca = server().ca.display().to_string();
    let with = |url: &str, args: &[&str]| {
        let mut cmd = project.command(args);
        cmd.env("MEKARA_STORE_URL", url);
        run_with_stdin(cmd, "")
    };
    // What the person read, the database's name and port written as placeholders.
    let said = |run: &Run| {
        project
            .scrub(&run.stderr)
            .replace(&db.name, "[DB]")
            .replace(&db.port.to_string(), "[PORT]")
    };

    // On this machine a URL without `sslmode` goes without TLS, and this role is refused.
    let refused = with(&plain, &["store", "migrate"]);
    insta::assert_snapshot!("a_tls_only_role_without_tls", said(&refused));

    let tls = format!("{plain}?sslmode=verify-full&sslrootcert={ca}");
    with(&tls, &["store", "migrate"]).expect_code(0);
    with(&tls, &["run", "steps"]).expect_code(0);
    assert_eq!(db.ids().len(), 1, "the run went to the database over TLS");

    let untrusted = with(&format!("{plain}?sslmode=require"), &["runs"]);
    untrusted.expect_code(1);
    assert!(!untrusted.stderr.contains(PASSWORD), "{}", untrusted.stderr);
    insta::assert_snapshot!("an_untrusted_certificate", said(&untrusted));
}

/// A project's config names its store without a password, and the password is the
/// person's, in `~/.pgpass`: what a team commits now that `${VAR}` is refused there.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn the_password_of_a_project_store_url_comes_from_the_persons_pgpass() {
    let shared = tempfile::tempdir().expect("tempdir");
    let project = checkout(shared.path());
    let db = Db::migrated(&project);
    project.write(
        ".mekara/config.toml",
        &format!(
            "[store]\nurl = \"postgres://mekara@127.0.0.1:{}/{}\"\nproject = \"acme\"\n",
            db.port, db.name
        ),
    );
    let pgpass = crate::common::write_file(
        &project.home().join(".pgpass"),
        &format!("127.0.0.1:{}:{}:mekara:{PASSWORD}\n", db.port, db.name),
    );
    std::fs::set_permissions(&pgpass, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    project.run(&["run", "steps"], "").expect_code(0);
    assert_eq!(db.ids().len(), 1, "the run went to the database");
}
