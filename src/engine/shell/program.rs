//! Which shell runs a step: on Unix `bash` from `PATH` (else `/bin/sh`); on Windows the bash
//! Claude Code uses there, Git for Windows' (`bash.exe`), found as Claude Code finds it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The setting Claude Code reads for the path of Git for Windows' `bash.exe`; mekara honours
/// it first, so both use the same bash.
pub(crate) const GIT_BASH_SETTING: &str = "CLAUDE_CODE_GIT_BASH_PATH";

/// What to do when there is no bash on Windows, for the step's error.
pub(crate) const NO_GIT_BASH_HINT: &str = "shell steps on Windows run with Git for Windows' bash: install Git for Windows (https://git-scm.com/downloads/win), or set `CLAUDE_CODE_GIT_BASH_PATH` to a `bash.exe`";

/// The shell of this machine's steps.
pub(crate) fn default_shell() -> PathBuf {
    if cfg!(windows) {
        git_bash(&|name| std::env::var_os(name), &|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("bash.exe"))
    } else {
        find_in_path("bash").unwrap_or_else(|| PathBuf::from("/bin/sh"))
    }
}

/// Git for Windows' `bash.exe`: the path in [`GIT_BASH_SETTING`] when it names a file, else
/// the usual install places (for all users, for one user), else next to a `git.exe` on
/// `PATH` (`<Git>\cmd\git.exe` → `<Git>\bin\bash.exe`), else a `bash.exe` on `PATH` that is
/// not Windows' own (`System32\bash.exe` starts WSL, another system with other paths).
/// `var` reads the environment and `is_file` the disk, so that this is tested anywhere.
pub(crate) fn git_bash(
    var: &dyn Fn(&str) -> Option<OsString>,
    is_file: &dyn Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(configured) = set(GIT_BASH_SETTING) {
        if is_file(&configured) {
            return Some(configured);
        }
        tracing::warn!(
            "`{GIT_BASH_SETTING}` is `{}`, which is not a file; looking for Git for Windows' bash elsewhere",
            configured.display()
        );
    }
    let installed = [
        set("ProgramFiles").map(|p| p.join("Git")),
        set("ProgramFiles(x86)").map(|p| p.join("Git")),
        set("ProgramW6432").map(|p| p.join("Git")),
        set("LOCALAPPDATA").map(|p| p.join("Programs").join("Git")),
    ];
    let on_path: Vec<PathBuf> = var("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let beside_git = on_path
        .iter()
        .filter(|dir| is_file(&dir.join("git.exe")))
        .filter_map(|dir| dir.parent().map(Path::to_path_buf));
    installed
        .into_iter()
        .flatten()
        .chain(beside_git)
        .map(|git| git.join("bin").join("bash.exe"))
        .chain(
            on_path
                .iter()
                .filter(|dir| !is_windows_own(dir))
                .map(|dir| dir.join("bash.exe")),
        )
        .find(|bash| is_file(bash))
}

/// Whether `dir` is Windows' own `System32` (whose `bash.exe` is WSL's launcher).
fn is_windows_own(dir: &Path) -> bool {
    let text = dir
        .to_string_lossy()
        .replace('\\', "/")
        .to_ascii_lowercase();
    text.trim_end_matches('/').ends_with("/system32")
}

/// The shells a step may name (`auto(..., shell = "pwsh")`).
const NAMED: [&str; 3] = ["bash", "pwsh", "cmd"];

/// Checks a shell a script named: what the step keeps, `None` for the default bash.
pub(crate) fn named(name: &str) -> anyhow::Result<Option<String>> {
    match name {
        "bash" => Ok(None),
        "pwsh" | "cmd" => Ok(Some(name.to_string())),
        _ => anyhow::bail!(
            "`shell` is `{name}`, which mekara does not know; use one of {}",
            NAMED.map(|n| format!("`\"{n}\"`")).join(", ")
        ),
    }
}

/// What runs a step's command.
pub(super) enum Program {
    /// The runner's own shell, as `SHELL -c COMMAND`.
    Default,
    /// Another shell: the program and its arguments before the command, and whether the
    /// command goes last as it is (`cmd`, whose own rules read the rest of its command line;
    /// the caller quotes it so) or quoted as one argument.
    Named {
        program: PathBuf,
        args: &'static [&'static str],
        /// Only `cmd` sets it, which only Windows has.
        #[cfg_attr(unix, allow(dead_code))]
        raw: bool,
    },
}

/// What runs a step that named `shell`, or why it cannot run here.
pub(super) fn for_step(shell: Option<&str>) -> Result<Program, String> {
    match shell {
        None | Some("bash") => Ok(Program::Default),
        Some("pwsh") => find_in_path("pwsh")
            .map(|program| Program::Named {
                program,
                args: &["-NoProfile", "-NonInteractive", "-Command"],
                raw: false,
            })
            .ok_or_else(|| {
                "`shell = \"pwsh\"` needs PowerShell 7 (`pwsh`) on `PATH`, and there is none; install it (https://aka.ms/powershell) or run the command with bash".to_string()
            }),
        Some("cmd") if cfg!(windows) => Ok(Program::Named {
            program: cmd_exe(),
            args: CMD_ARGS,
            raw: true,
        }),
        Some("cmd") => Err(
            "`shell = \"cmd\"` is Windows' `cmd.exe`, which this machine does not have; run the command with bash, or the step on Windows".to_string(),
        ),
        Some(other) => Err(format!("`shell` is `{other}`, which mekara does not know")),
    }
}

/// What `cmd` is given before a command: no AutoRun, the command's quotes kept, run it.
const CMD_ARGS: &[&str] = &["/D", "/S", "/C"];

/// Windows' `cmd.exe`: `ComSpec`, else the one on `PATH`.
fn cmd_exe() -> PathBuf {
    std::env::var_os("ComSpec")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| find_in_path("cmd"))
        .unwrap_or_else(|| PathBuf::from("cmd.exe"))
}

/// `program ARGS... COMMAND`: `COMMAND` as one argument, or when `raw` (`cmd`) quoted as
/// `cmd /S /C "COMMAND"` wants it: cmd drops the outer quotes and reads the rest as it is,
/// by its own rules rather than a C program's.
#[cfg(windows)]
pub(super) fn with_command(
    program: &Path,
    args: &[&str],
    raw: bool,
    command: &str,
) -> std::process::Command {
    use std::os::windows::process::CommandExt as _;
    let mut spawned = std::process::Command::new(program);
    spawned.args(args);
    if raw {
        spawned.raw_arg(format!("\"{command}\""));
    } else {
        spawned.arg(command);
    }
    spawned
}

/// A command line that mekara runs outside a step (a `[notify] command`), run as a step
/// without `shell` runs: `sh -c` on Unix; on Windows with Git for Windows' bash
/// ([`git_bash`]) when there is one, else with `cmd /D /S /C`, which every Windows has.
pub(crate) fn one_line(command: &str) -> std::process::Command {
    #[cfg(windows)]
    {
        match git_bash(&|name| std::env::var_os(name), &|p| p.is_file()) {
            Some(bash) => with_command(&bash, &["-c"], false, command),
            None => with_command(&cmd_exe(), CMD_ARGS, true, command),
        }
    }
    #[cfg(not(windows))]
    {
        let mut spawned = std::process::Command::new("sh");
        spawned.arg("-c").arg(command);
        spawned
    }
}

/// `program` in a folder of `PATH` (on Windows, `program.exe`).
pub(super) fn find_in_path(program: &str) -> Option<PathBuf> {
    let file = format!("{program}{}", std::env::consts::EXE_SUFFIX);
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(&file))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(vars: &[(&str, &str)], files: &[&str]) -> Option<String> {
        let var = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        };
        let is_file = |p: &Path| files.iter().any(|f| Path::new(f) == p);
        git_bash(&var, &is_file).map(|p| p.to_string_lossy().replace('\\', "/"))
    }

    #[test]
    fn the_setting_claude_code_reads_comes_first() {
        let vars = [
            (GIT_BASH_SETTING, "D:/tools/git/bin/bash.exe"),
            ("ProgramFiles", "C:/Program Files"),
        ];
        let files = [
            "D:/tools/git/bin/bash.exe",
            "C:/Program Files/Git/bin/bash.exe",
        ];
        assert_eq!(
            found(&vars, &files).as_deref(),
            Some("D:/tools/git/bin/bash.exe")
        );
    }

    #[test]
    fn a_setting_that_names_no_file_falls_back_to_the_install_places() {
        let vars = [
            (GIT_BASH_SETTING, "D:/nowhere/bash.exe"),
            ("ProgramFiles", "C:/Program Files"),
        ];
        assert_eq!(
            found(&vars, &["C:/Program Files/Git/bin/bash.exe"]).as_deref(),
            Some("C:/Program Files/Git/bin/bash.exe")
        );
        let per_user = [("LOCALAPPDATA", "C:/Users/a/AppData/Local")];
        assert_eq!(
            found(
                &per_user,
                &["C:/Users/a/AppData/Local/Programs/Git/bin/bash.exe"]
            )
            .as_deref(),
            Some("C:/Users/a/AppData/Local/Programs/Git/bin/bash.exe")
        );
    }

    #[test]
    fn bash_is_found_beside_git_on_path_but_never_wsls() {
        // No drive letters: `PATH` is split by the machine's own rules (`:` on Unix).
        let path =
            std::env::join_paths(["/Windows/System32", "/Git/cmd", "/msys/usr/bin"]).expect("join");
        let path = path.to_string_lossy();
        let vars = [("PATH", path.as_ref())];
        assert_eq!(
            found(&vars, &["/Git/cmd/git.exe", "/Git/bin/bash.exe"]).as_deref(),
            Some("/Git/bin/bash.exe")
        );
        assert_eq!(
            found(
                &vars,
                &["/Windows/System32/bash.exe", "/msys/usr/bin/bash.exe"]
            )
            .as_deref(),
            Some("/msys/usr/bin/bash.exe")
        );
        assert_eq!(found(&vars, &["/Windows/System32/bash.exe"]), None);
        assert_eq!(found(&[], &[]), None);
    }
}

#[cfg(test)]
mod named_tests {
    use super::*;

    #[test]
    fn a_step_names_bash_pwsh_or_cmd_and_nothing_else() {
        assert_eq!(named("bash").expect("bash"), None);
        assert_eq!(named("pwsh").expect("pwsh").as_deref(), Some("pwsh"));
        assert_eq!(named("cmd").expect("cmd").as_deref(), Some("cmd"));
        for bad in ["zsh", "", "BASH", "cmd.exe", "bash -e", "pwsh; rm -rf /"] {
            let error = named(bad).expect_err(bad).to_string();
            assert!(error.starts_with(&format!("`shell` is `{bad}`")), "{error}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn cmd_on_unix_is_a_clear_error() {
        let Err(error) = for_step(Some("cmd")) else {
            panic!("cmd on Unix");
        };
        assert!(error.contains("Windows' `cmd.exe`"), "{error}");
    }
}
