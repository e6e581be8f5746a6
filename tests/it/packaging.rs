//! The packages mekara is installed from, built by `packaging/build` for this platform and
//! installed the way a person does: the wheel with pip into a fresh virtualenv, and the npm
//! packages (the `mekara` launcher and this platform's binary package) into an empty folder,
//! offline. Each installed `mekara` then prints its version, sets up a project and plays
//! the bundled number-guessing script in the terminal, as the README's quick start does.
//!
//! The packages are built once per test run into `target/test-packages/`, from the binary
//! under test: maturin (which always runs cargo) is given that binary's profile and
//! features, so cargo finds it up to date, and `packaging/build` checks the wheel has the
//! same file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::{Run, run_with_stdin};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What `packaging/build` made.
struct Packages {
    wheel: PathBuf,
    npm_main: PathBuf,
    npm_platform: PathBuf,
}

/// The packages, built on first use (the tests here share them).
fn packages() -> &'static Packages {
    static PACKAGES: OnceLock<Packages> = OnceLock::new();
    PACKAGES.get_or_init(|| {
        let maturin = crate::common::outside_client(
            "packaging/bin/maturin",
            "maturin",
            "tests/packaging/install.sh",
        );
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let binary = Path::new(env!("CARGO_BIN_EXE_mekara"));
        let profile = match binary.parent().and_then(Path::file_name) {
            Some(dir) if dir == "debug" => "dev",
            Some(dir) => dir.to_str().expect("a UTF-8 profile"),
            None => "release",
        };
        let features: Vec<&str> = [("clients", cfg!(feature = "clients"))]
            .into_iter()
            .filter_map(|(name, on)| on.then_some(name))
            .collect();
        let out = root.join("target/test-packages");
        let _ = std::fs::remove_dir_all(&out);
        let started = std::time::Instant::now();
        let before = binary_identity(binary);
        // Only what cargo needs of the test's environment: `cargo test` gives the test
        // CARGO_MANIFEST_DIR, which ring's build script tracks, so with it the cargo under
        // maturin would build ring, rustls and mekara again.
        let mut build = Command::new("bash");
        build
            .arg(root.join("packaging/build"))
            .args(["--binary", binary.to_str().expect("a UTF-8 path")])
            .args(["--profile", profile])
            .args(["--features", &features.join(",")])
            .arg(&out)
            .env_clear()
            .env("MATURIN", &maturin);
        for name in [
            "PATH",
            "HOME",
            "CARGO_HOME",
            "RUSTUP_HOME",
            "RUSTUP_TOOLCHAIN",
        ] {
            if let Some(value) = std::env::var_os(name) {
                build.env(name, value);
            }
        }
        let run = Run::from_output(build.output().expect("run packaging/build"));
        run.expect_code(0);
        // A rebuild would have replaced the binary the other tests are running.
        assert_eq!(
            binary_identity(binary),
            before,
            "maturin's cargo built mekara again:\n{}",
            run.stderr
        );
        println!(
            "packaging/build took {:.1} s:\n{}",
            started.elapsed().as_secs_f64(),
            run.stdout
        );
        let find = |prefix: &str, suffix: &str| {
            std::fs::read_dir(&out)
                .expect("the packages' folder")
                .flatten()
                .map(|e| e.path())
                .find(|p| {
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    name.starts_with(prefix) && name.ends_with(suffix)
                })
                .unwrap_or_else(|| panic!("packaging/build made no {prefix}*{suffix}"))
        };
        let sums = std::fs::read_to_string(out.join("SHA256SUMS")).expect("SHA256SUMS");
        assert_eq!(sums.lines().count(), 4, "{sums}");
        let packages = Packages {
            wheel: find(&format!("mekara_cli-{VERSION}-"), ".whl"),
            npm_main: find(&format!("mekara-{VERSION}"), ".tgz"),
            npm_platform: find("mekara-dev-mekara-", &format!("-{VERSION}.tgz")),
        };
        // What a person downloads (docs/design.md has the figures): 9.3 MB each today.
        if !cfg!(debug_assertions) {
            for package in [&packages.wheel, &packages.npm_platform] {
                let size = std::fs::metadata(package).expect("the package").len();
                assert!(
                    size <= 12_000_000,
                    "{} is {size} bytes, over 12 MB",
                    package.display()
                );
            }
        }
        packages
    })
}

/// The file's inode and modification time: whether cargo linked it again.
fn binary_identity(path: &Path) -> (u64, std::time::SystemTime) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).expect("the binary under test");
    (meta.ino(), meta.modified().expect("mtime"))
}

/// A temporary place with an empty project folder and a home folder of its own.
struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["project", "home"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        Place { dir }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// `PROGRAM ARGS` in `dir`, with only `bin` (when given) before the system's folders on
    /// the `PATH`, the home folder, and npm offline with its cache in this place.
    fn command(&self, dir: &Path, bin: Option<&Path>, program: &str, args: &[&str]) -> Command {
        let mut path = std::env::var("PATH").unwrap_or_default();
        if let Some(bin) = bin {
            path = format!("{}:{path}", bin.display());
        }
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.path("home"))
            .env("NO_COLOR", "1")
            .env("LANG", "C.UTF-8")
            .env("npm_config_cache", self.path("npm-cache"))
            .env("npm_config_offline", "true")
            .env("npm_config_registry", "http://127.0.0.1:9/")
            .env("npm_config_update_notifier", "false");
        command
    }
}

fn output(mut command: Command) -> Run {
    Run::from_output(command.output().expect("spawn"))
}

/// What a person checks after installing: `mekara --version`, `mekara install` in an empty
/// project (which writes `.mcp.json`), and the quick start's number-guessing game played to
/// the end with a guess on standard input. `mekara` is `PROGRAM ARGS...` (the venv's
/// `mekara`, or `npx mekara`).
fn walk_the_quick_start(place: &Place, bin: Option<&Path>, mekara: &[&str]) {
    let project = place.path("project");
    let command = |args: &[&str]| {
        let all: Vec<&str> = mekara[1..].iter().chain(args).copied().collect();
        place.command(&project, bin, mekara[0], &all)
    };

    let version = output(command(&["--version"]));
    version.expect_code(0);
    assert_eq!(version.stdout, format!("mekara {VERSION}\n"));

    let install = output(command(&["install"]));
    install.expect_code(0);
    let mcp = std::fs::read_to_string(project.join(".mcp.json")).expect(".mcp.json written");
    assert!(mcp.contains("\"mekara\""), "{mcp}");

    let run = run_with_stdin(command(&["run", "test/random"]), "50\n\n");
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("guess (the user's guess, as a whole number): 50"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("completed: 4 steps in "),
        "{}",
        run.stdout
    );
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs maturin")]
fn the_wheel_installs_with_pip_and_runs_the_quick_start() {
    let packages = packages();
    let place = Place::new();
    let venv = place.path("venv");
    let python = if Command::new("python3.11").arg("-V").output().is_ok() {
        "python3.11"
    } else {
        "python3"
    };
    let created = output(place.command(
        place.dir.path(),
        None,
        python,
        &["-m", "venv", venv.to_str().expect("UTF-8")],
    ));
    created.expect_code(0);
    let pip = output(place.command(
        place.dir.path(),
        None,
        venv.join("bin/pip").to_str().expect("UTF-8"),
        &[
            "install",
            "--quiet",
            "--no-index",
            "--disable-pip-version-check",
            packages.wheel.to_str().expect("UTF-8"),
        ],
    ));
    pip.expect_code(0);
    // `mekara` as found on the PATH, as in an activated venv (or pipx's folder of commands).
    walk_the_quick_start(&place, Some(&venv.join("bin")), &["mekara"]);
}

/// `npm install TARBALLS...` in the place's project, offline.
fn npm_install(place: &Place, extra: &[&str], tarballs: &[&Path]) {
    let mut args = vec!["install", "--no-audit", "--no-fund", "--offline"];
    args.extend_from_slice(extra);
    args.extend(tarballs.iter().map(|p| p.to_str().expect("UTF-8")));
    let installed = output(place.command(&place.path("project"), None, "npm", &args));
    installed.expect_code(0);
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs maturin")]
fn the_npm_packages_install_offline_and_run_the_quick_start() {
    let packages = packages();
    let place = Place::new();
    npm_install(&place, &[], &[&packages.npm_main, &packages.npm_platform]);
    walk_the_quick_start(&place, None, &["npx", "mekara"]);

    // The launcher ends with mekara's exit code and passes its output through: a usage
    // error is 2.
    let project = place.path("project");
    let missing = output(place.command(
        &project,
        None,
        "npx",
        &["mekara", "check", "no-such-script"],
    ));
    missing.expect_code(2);
    assert_eq!(
        missing.stderr,
        "error: script `no-such-script` not found; `mekara scripts` lists the scripts there are\n"
    );
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs maturin")]
fn without_its_platform_package_the_npm_launcher_says_what_to_do() {
    let packages = packages();
    let place = Place::new();
    npm_install(&place, &["--omit=optional"], &[&packages.npm_main]);
    let run = output(place.command(
        &place.path("project"),
        None,
        "npx",
        &["mekara", "--version"],
    ));
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .starts_with("mekara: no prebuilt binary for this platform (")
            && run.stderr.contains("pipx install mekara-cli"),
        "{}",
        run.stderr
    );
}

/// The launcher passes SIGINT, SIGTERM and SIGHUP on to mekara, and ends as mekara ended:
/// `mekara run` stops the running step on each and exits 130 (run as a script would, without
/// a terminal). In a terminal, Ctrl-C stops the step as it does without the launcher.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs maturin")]
fn the_npm_launcher_passes_signals_on_and_ends_as_mekara_did() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let packages = packages();
    let place = Place::new();
    npm_install(&place, &[], &[&packages.npm_main, &packages.npm_platform]);
    let project = place.path("project");
    crate::common::write_file(
        &project.join(".mekara/scripts/nl/wait.md"),
        "---\ndescription: Waits\n---\n1. Wait.\n",
    );
    crate::common::write_file(
        &project.join(".mekara/scripts/compiled/wait.star"),
        "def execute(request):\n    auto(\"sleep 30\", context = \"Step 1: wait\")\n",
    );
    let launcher = project.join("node_modules/.bin/mekara");
    for signal in ["INT", "TERM", "HUP"] {
        let mut child = place
            .command(
                &project,
                None,
                launcher.to_str().expect("UTF-8"),
                &["run", "wait"],
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the launcher");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        while !line.contains("$ sleep 30") {
            line.clear();
            let read = stdout.read_line(&mut line).expect("read stdout");
            assert_ne!(read, 0, "mekara ended before its step started");
        }
        let started = std::time::Instant::now();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        let status = child.wait().expect("wait for the launcher");
        assert!(
            started.elapsed().as_secs() < 20,
            "SIG{signal} did not stop mekara"
        );
        assert_eq!(status.code(), Some(130), "SIG{signal}: {status:?}");
    }

    // Ctrl-C in a terminal reaches mekara from the terminal, once: the step is stopped and
    // the run can be resumed. (Passed on by the launcher as well, the second SIGINT made
    // mekara leave at once, without that line, in 5 runs out of 6.)
    let terminal = output(place.command(
        &project,
        None,
        "python3",
        &[
            "-c",
            CTRL_C_IN_A_TERMINAL,
            launcher.to_str().expect("UTF-8"),
        ],
    ));
    terminal.expect_code(130);
    assert!(
        terminal
            .stdout
            .contains("interrupted: step wait[0] was stopped; resume with"),
        "{}",
        terminal.stdout
    );
}

/// Runs `LAUNCHER run wait` in a new terminal (a pty), types Ctrl-C once the step runs,
/// prints what the terminal showed and exits with the launcher's exit code.
const CTRL_C_IN_A_TERMINAL: &str = r#"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "run", "wait"])
shown, typed, start = b"", False, time.time()
while time.time() - start < 30:
    if select.select([fd], [], [], 0.1)[0]:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        shown += data
    if not typed and b"$ sleep 30" in shown:
        time.sleep(0.3)
        os.write(fd, b"\x03")
        typed = True
_, status = os.waitpid(pid, 0)
sys.stdout.write(shown.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
"#;
