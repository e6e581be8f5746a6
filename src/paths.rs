//! Where mekara's files live: the project root, the user folder and the runs folder.
//!
//! Script resolution depends only on these, computed once from the current directory of
//! the process, never on the `working_dir` a step runs in (DESIGN §2).

use std::path::{Path, PathBuf};

/// The folders mekara reads scripts from and writes runs to.
#[derive(Debug, Clone)]
pub struct Locations {
    /// The folder the project was looked for from, and above: the current directory.
    pub cwd: PathBuf,
    /// The nearest ancestor of the current directory holding `.mekara/` or `.claude/`.
    pub project_root: Option<PathBuf>,
    /// The user's home folder (see [`home_dir`]).
    pub home: Option<PathBuf>,
}

/// The user's home folder: `HOME`, else on Windows `USERPROFILE` (where Claude Code and the
/// other clients keep their settings there; `HOME` is usually unset).
pub(crate) fn home_dir() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|h| !h.is_empty());
    set("HOME")
        .or_else(|| set("USERPROFILE").filter(|_| cfg!(windows)))
        .map(PathBuf::from)
}

impl Locations {
    /// Finds the project around `cwd` and the user's home from the environment.
    pub fn discover(cwd: &Path) -> Locations {
        let home = home_dir();
        Locations {
            cwd: cwd.to_path_buf(),
            project_root: find_project_root(cwd, home.as_deref()),
            home,
        }
    }

    /// Locations from the process's current directory.
    pub fn from_current_dir() -> std::io::Result<Locations> {
        Ok(Locations::discover(&std::env::current_dir()?))
    }

    /// `<root>/.mekara`, when there is a project.
    pub fn project_dir(&self) -> Option<PathBuf> {
        self.project_root.as_ref().map(|r| r.join(".mekara"))
    }

    /// `~/.mekara`, when `HOME` is set.
    pub fn user_dir(&self) -> Option<PathBuf> {
        self.home.as_ref().map(|h| h.join(".mekara"))
    }

    /// Where runs are journaled: the project's `.mekara/runs`, else `~/.mekara/runs`.
    pub fn runs_dir(&self) -> Option<PathBuf> {
        self.project_dir()
            .or_else(|| self.user_dir())
            .map(|d| d.join("runs"))
    }

    /// Where evals keep their folders (`mekara eval`): beside the runs they started.
    pub fn evals_dir(&self) -> Option<PathBuf> {
        self.project_dir()
            .or_else(|| self.user_dir())
            .map(|d| d.join("evals"))
    }
}

/// The nearest ancestor of `cwd` (itself included) that holds `.mekara/` or `.claude/`.
///
/// The home folder itself is never a project root: `~/.claude` is Claude Code's user folder
/// and `~/.mekara` is mekara's user level, so without this rule every folder under home
/// would belong to one big "project".
///
/// Home is compared both as written and resolved, since the current directory comes with
/// symlinks resolved (`/home` → `/usr/home` on FreeBSD, `/var/home` on Silverblue).
fn find_project_root(cwd: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let resolved_home = home.and_then(|h| h.canonicalize().ok());
    cwd.ancestors()
        .filter(|dir| Some(*dir) != home && Some(*dir) != resolved_home.as_deref())
        .find(|dir| dir.join(".mekara").is_dir() || dir.join(".claude").is_dir())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_is_never_a_project_root() {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(home.path().join(".claude")).expect("mkdir");
        let sub = home.path().join("code");
        std::fs::create_dir(&sub).expect("mkdir");
        assert_eq!(find_project_root(&sub, Some(home.path())), None);
        std::fs::create_dir(sub.join(".mekara")).expect("mkdir");
        assert_eq!(find_project_root(&sub, Some(home.path())), Some(sub));
    }
}
