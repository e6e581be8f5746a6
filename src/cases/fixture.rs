//! A test case's fixture: the scratch project a case (or an eval trial) runs in, made from a
//! folder to copy, files to write, an optional git repository and set-up commands.
//!
//! [`prepare`] makes a fresh temporary folder holding `project/` (where the run happens) and
//! `home/` (the `HOME` of everything run there, with a fixed git identity), so nothing of the
//! person's own setup or of another case leaks in. Everything that runs in a scratch project
//! gets [`Scratch::env`]: commits made there (by the fixture, by set-up commands, by the
//! workflow) have a fixed author and fixed dates, so their hashes are the same on every run.
//!
//! This module knows nothing of case files or runs: `mekara test` and `mekara eval` both call
//! it. It trusts the paths it is given; checking that a case's folder stays inside the case's
//! own folder is the case parser's job.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a scratch project is made of, applied in this order: `dir` copied, `files` written,
/// `git` committed, `setup` run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fixture {
    /// A folder whose contents are copied into the project (symbolic links stay links).
    pub dir: Option<PathBuf>,
    /// Files to write, by their path relative to the project, with their text.
    pub files: BTreeMap<String, String>,
    /// Make the project a git repository (branch `main`) with everything above committed as
    /// `Initial commit`.
    pub git: bool,
    /// Shell commands (`sh -c`) run in the project, in order, each of which must succeed.
    pub setup: Vec<String>,
}

/// A prepared scratch project; its folder is removed when this is dropped.
#[derive(Debug)]
pub(crate) struct Scratch {
    temp: tempfile::TempDir,
    project: PathBuf,
    home: PathBuf,
}

/// Why a scratch project could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FixtureError {
    #[error("cannot make a scratch folder: {0}")]
    Temp(#[source] std::io::Error),
    #[error("cannot copy the fixture `{}` into the scratch project: {source}", path.display())]
    Copy {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the fixture file `{path}`: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the fixture file path `{0}` must be relative and stay inside the project (no `..`)")]
    BadPath(String),
    #[error("the fixture's {what} `{command}` failed{}{}", code.map_or_else(String::new, |c| format!(" with exit code {c}")), said(output))]
    Command {
        /// `set-up command`, or `git` for making the repository.
        what: &'static str,
        command: String,
        code: Option<i32>,
        /// What it printed (stdout and stderr), shortened.
        output: String,
    },
}

/// ` : OUTPUT` for an error message, or nothing when the command printed nothing.
fn said(output: &str) -> String {
    let output = output.trim();
    if output.is_empty() {
        String::new()
    } else {
        format!(":\n{}", crate::display::clipped(output, 2000))
    }
}

/// The fixed identity and time of every commit made in a scratch project.
const GIT_NAME: &str = "Test Person";
const GIT_EMAIL: &str = "person@example.com";
const GIT_DATE: &str = "2026-01-01T00:00:00Z";

impl Scratch {
    /// The project: where the run happens.
    pub(crate) fn project(&self) -> &Path {
        &self.project
    }

    /// The `HOME` of everything run in the project.
    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    /// The scratch folder holding `project/` and `home/`; files a runner keeps beside the
    /// project (requests, reports) go here.
    pub(crate) fn root(&self) -> &Path {
        self.temp.path()
    }

    /// The environment variables to set on everything run in the project: `HOME`, the fixed
    /// git identity and dates, and the person's own cargo and rustup homes (found through
    /// the `HOME` they had), so Rust projects still build offline from the registry cache.
    pub(crate) fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut env: Vec<(&'static str, OsString)> = vec![("HOME", self.home.clone().into())];
        let own_home = std::env::var_os("HOME").map(PathBuf::from);
        for (var, folder) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
            let value = std::env::var_os(var).or_else(|| {
                own_home
                    .as_ref()
                    .map(|h| h.join(folder))
                    .filter(|p| p.exists())
                    .map(PathBuf::into_os_string)
            });
            if let Some(value) = value {
                env.push((var, value));
            }
        }
        for (var, value) in [
            ("GIT_AUTHOR_NAME", GIT_NAME),
            ("GIT_AUTHOR_EMAIL", GIT_EMAIL),
            ("GIT_AUTHOR_DATE", GIT_DATE),
            ("GIT_COMMITTER_NAME", GIT_NAME),
            ("GIT_COMMITTER_EMAIL", GIT_EMAIL),
            ("GIT_COMMITTER_DATE", GIT_DATE),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            // Nothing a case runs goes to the network: cargo builds from the registry cache.
            ("CARGO_NET_OFFLINE", "true"),
            ("NO_COLOR", "1"),
        ] {
            env.push((var, value.into()));
        }
        env
    }

    /// `sh -c SHELL` in the project, with [`Scratch::env`] set and the outer git variables
    /// (`GIT_DIR`, ...) that would point it elsewhere removed.
    pub(crate) fn command(&self, shell: &str) -> Command {
        let mut command = Command::new("sh");
        command.arg("-c").arg(shell).current_dir(&self.project);
        for var in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"] {
            command.env_remove(var);
        }
        command.envs(self.env());
        command
    }

    /// Keeps the scratch folder on disk (to look at a failed case) and returns its path.
    pub(crate) fn keep(self) -> PathBuf {
        self.temp.keep()
    }
}

/// Makes a scratch project from `fixture`.
pub(crate) fn prepare(fixture: &Fixture) -> Result<Scratch, FixtureError> {
    let temp = tempfile::Builder::new()
        .prefix("mekara-case-")
        .tempdir()
        .map_err(FixtureError::Temp)?;
    let project = temp.path().join("project");
    let home = temp.path().join("home");
    for folder in [&project, &home] {
        std::fs::create_dir(folder).map_err(FixtureError::Temp)?;
    }
    std::fs::write(
        home.join(".gitconfig"),
        format!(
            "[user]\n\tname = {GIT_NAME}\n\temail = {GIT_EMAIL}\n[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n"
        ),
    )
    .map_err(FixtureError::Temp)?;
    let scratch = Scratch {
        temp,
        project,
        home,
    };
    if let Some(dir) = &fixture.dir {
        copy_dir(dir, &scratch.project).map_err(|source| FixtureError::Copy {
            path: dir.clone(),
            source,
        })?;
    }
    for (path, text) in &fixture.files {
        let relative = relative_path(path).ok_or_else(|| FixtureError::BadPath(path.clone()))?;
        let target = scratch.project.join(relative);
        let write = || {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&target, text)
        };
        write().map_err(|source| FixtureError::Write {
            path: path.clone(),
            source,
        })?;
    }
    if fixture.git {
        // mekara's own folder (runs, their journals) is never part of the repository, and
        // leaving it out through `info/exclude` keeps the project's `.gitignore` as written.
        for command in [
            "git init -q",
            "mkdir -p .git/info && printf '.mekara/\\n' >> .git/info/exclude",
            "git add -A",
            "git commit -q --allow-empty -m 'Initial commit'",
        ] {
            run(&scratch, "git", command)?;
        }
    }
    for command in &fixture.setup {
        run(&scratch, "set-up command", command)?;
    }
    Ok(scratch)
}

/// `path` as a relative path with only normal parts, or `None` (absolute, `..`, empty).
pub(crate) fn relative_path(path: &str) -> Option<PathBuf> {
    use std::path::Component;
    let p = Path::new(path);
    let normal = p.components().all(|c| matches!(c, Component::Normal(_)));
    (normal && !path.is_empty() && p.components().next().is_some()).then(|| p.to_path_buf())
}

/// Runs `command` in the scratch project; its failure is a [`FixtureError::Command`].
fn run(scratch: &Scratch, what: &'static str, command: &str) -> Result<(), FixtureError> {
    let failed = |code, output| FixtureError::Command {
        what,
        command: command.to_string(),
        code,
        output,
    };
    let out = scratch
        .command(command)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| failed(None, e.to_string()))?;
    if out.status.success() {
        return Ok(());
    }
    let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&out.stderr));
    Err(failed(out.status.code(), output))
}

/// Copies the contents of `from` into the existing folder `to`: folders and files, symbolic
/// links as links (never followed, so a link cannot pull in what lies outside the fixture);
/// other kinds of files (sockets, devices) are skipped.
pub(crate) fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        } else if kind.is_symlink() {
            copy_link(&entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(unix)]
fn copy_link(link: &Path, target: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(std::fs::read_link(link)?, target)
}

#[cfg(not(unix))]
fn copy_link(link: &Path, target: &Path) -> std::io::Result<()> {
    // Without Unix links, the file a link points at is copied when it is a file.
    if std::fs::metadata(link)?.is_file() {
        std::fs::copy(link, target)?;
    }
    Ok(())
}

// Every test here runs `sh`, `git` or a symbolic link: Unix tools, absent under the Wine the
// Windows unit tests run in.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_is_copied_written_committed_and_set_up_in_order() {
        let source = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(source.path().join("src")).expect("mkdir");
        std::fs::write(source.path().join("src/lib.rs"), "fn a() {}\n").expect("write");
        let fixture = Fixture {
            dir: Some(source.path().to_path_buf()),
            files: BTreeMap::from([("notes/todo.txt".to_string(), "one\n".to_string())]),
            git: true,
            setup: vec!["echo two >> notes/todo.txt".to_string()],
        };
        let scratch = prepare(&fixture).expect("prepare");
        let project = scratch.project();
        assert_eq!(
            std::fs::read_to_string(project.join("src/lib.rs")).expect("copied"),
            "fn a() {}\n"
        );
        assert_eq!(
            std::fs::read_to_string(project.join("notes/todo.txt")).expect("written"),
            "one\ntwo\n"
        );
        let out = scratch
            .command("git log --format='%an %ad %s' --date=iso-strict && git status --porcelain")
            .output()
            .expect("git");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "Test Person 2026-01-01T00:00:00Z Initial commit\n M notes/todo.txt\n"
        );
        // Two preparations of one fixture give the same commit.
        let again = prepare(&fixture).expect("prepare");
        let head = |s: &Scratch| {
            s.command("git rev-parse HEAD")
                .output()
                .expect("git")
                .stdout
        };
        assert_eq!(head(&scratch), head(&again));
    }

    #[test]
    fn a_failing_set_up_command_and_an_escaping_file_path_are_clear_errors() {
        let fixture = Fixture {
            setup: vec!["echo nope >&2; exit 3".to_string()],
            ..Fixture::default()
        };
        let error = prepare(&fixture).expect_err("fails").to_string();
        assert_eq!(
            error,
            "the fixture's set-up command `echo nope >&2; exit 3` failed with exit code 3:\nnope"
        );
        for path in ["../x", "/etc/passwd", "", "a/../../b"] {
            let fixture = Fixture {
                files: BTreeMap::from([(path.to_string(), String::new())]),
                ..Fixture::default()
            };
            assert!(
                matches!(prepare(&fixture), Err(FixtureError::BadPath(_))),
                "{path}"
            );
        }
    }

    #[test]
    fn a_link_in_the_fixture_stays_a_link() {
        let source = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink("/etc/hostname", source.path().join("outside")).expect("link");
        let scratch = prepare(&Fixture {
            dir: Some(source.path().to_path_buf()),
            ..Fixture::default()
        })
        .expect("prepare");
        assert!(
            std::fs::symlink_metadata(scratch.project().join("outside"))
                .expect("copied")
                .file_type()
                .is_symlink()
        );
    }
}
