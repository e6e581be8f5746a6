//! `mekara install` / `mekara uninstall`: setting a project (or the user's home) up for
//! Claude Code, and optionally the other agent clients it is given ([`ClientSetup`]).
//!
//! Work is done in two phases: [`plan`] reads every file it would touch and computes the
//! changes (refusing a file it cannot parse, before anything is written), then [`apply`]
//! makes them. `--dry-run` prints the plan without applying it. A file is only rewritten when
//! its content changes, so a second install changes nothing; JSON keeps its key order and
//! TOML its formatting. Uninstall removes exactly the entries install adds, and leaves
//! anything else (the script folders hold the person's scripts: they are never removed).
//!
//! This module owns the generic machinery: the plan, the file edit primitives
//! ([`edits`]), the NL scripts folder with its command files and the commands link
//! ([`commands`]), and the install record. What each client needs (its configuration edits,
//! its own command files, its notes) is in its file in [`crate::agents`], which this module
//! never imports: the command line gives [`plan`] the clients ([`crate::agents::CLIENTS`]),
//! each a [`ClientSetup`] whose step writes through [`Setup`].

mod change;
pub(crate) mod commands;
pub(crate) mod edits;
#[cfg(any(windows, test))]
mod junction;
#[cfg(test)]
mod plugin;
mod record;

use std::fmt;
use std::path::{Path, PathBuf};

pub(crate) use change::{Action, Change, Direction};
use commands::CommandFile;
use edits::Edit;
pub(crate) use edits::EditError;
use record::Record;

/// Where to install: a project folder, or the user's home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `<root>/.mekara`, `<root>/.claude`, `<root>/.mcp.json`.
    Project(PathBuf),
    /// `~/.mekara`, `~/.claude`, `~/.claude.json`.
    User(PathBuf),
}

impl Scope {
    /// The folder everything is under.
    pub(crate) fn base(&self) -> &Path {
        match self {
            Scope::Project(p) | Scope::User(p) => p,
        }
    }
}

/// Why install could not go ahead. Nothing has been written when [`plan`] fails.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InstallError {
    /// A configuration file could not be parsed or has an unexpected shape.
    #[error(transparent)]
    Edit(#[from] EditError),
    /// A file could not be read or written.
    #[error("cannot {action} `{}`: {source}", .path.display())]
    Io {
        /// What was being done (`read`, `write`, `link`, …).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// `.claude/commands` holds a file whose name is taken in the NL scripts folder.
    #[error(
        "`{}` and `{}` both exist with different contents; merge them by hand (keep one), then run `mekara install` again",
        .ours.display(), .theirs.display()
    )]
    CommandClash {
        /// The file in the commands folder.
        theirs: PathBuf,
        /// The file in the NL scripts folder.
        ours: PathBuf,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> InstallError {
    let path = path.to_path_buf();
    move |source| InstallError::Io {
        action,
        path,
        source,
    }
}

/// Everything install or uninstall would do.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Install or uninstall.
    pub direction: Direction,
    /// Where.
    pub scope: Scope,
    /// The changes, in the order they are applied.
    pub changes: Vec<Change>,
    /// Things that were left alone on purpose, and why.
    pub kept: Vec<String>,
    /// What the person still has to do.
    pub left_for_you: Vec<String>,
}

/// Computes what install or uninstall would change for `clients` (Claude Code is always
/// included) in `scope`. Reads files; writes nothing.
pub(crate) fn plan<C: ClientSetup>(
    scope: Scope,
    known: &[&C],
    clients: &[&C],
    direction: Direction,
) -> Result<Plan, InstallError> {
    let mut plan = Plan {
        direction,
        scope: scope.clone(),
        changes: Vec::new(),
        kept: Vec::new(),
        left_for_you: Vec::new(),
    };
    let base = scope.base();
    let installed = Record::read(base)?;
    let user = matches!(scope, Scope::User(_));
    let nl_dir = base.join(".mekara/scripts/nl");
    let commands = base.join(".claude/commands");
    // Joined part by part, so that Windows gets its own separator: a Windows link whose
    // target is written with `/` does not resolve.
    let link_target: PathBuf = ["..", ".mekara", "scripts", "nl"].iter().collect();

    match direction {
        Direction::Install => {
            for dir in [nl_dir.clone(), base.join(".mekara/scripts/compiled")] {
                if !dir.is_dir() {
                    plan.changes.push(Change {
                        path: dir,
                        action: Action::CreateDir,
                        details: Vec::new(),
                    });
                }
            }
            plan_link(&mut plan, &commands, &nl_dir, &link_target)?;
        }
        Direction::Uninstall => {
            // Every file install generated, also for a bundled script this mekara no longer has.
            for path in generated_files(&nl_dir)? {
                plan.changes.push(Change {
                    path,
                    action: Action::RemoveGenerated,
                    details: Vec::new(),
                });
            }
            if links_to(&commands, &nl_dir) {
                let restore = installed
                    .as_ref()
                    .filter(|r| !r.moved_commands.is_empty() || !r.dropped_commands.is_empty());
                let (action, details) = match restore {
                    Some(r) => (
                        Action::RestoreCommands {
                            files: r.moved_commands.iter().cloned().collect(),
                            dropped: r.dropped_commands.iter().cloned().collect(),
                            from: nl_dir.clone(),
                        },
                        r.moved_commands
                            .iter()
                            .chain(&r.dropped_commands)
                            .map(|f| format!("moved `{}` back", f.display()))
                            .collect(),
                    ),
                    None => (Action::RemoveSymlink, Vec::new()),
                };
                plan.changes.push(Change {
                    path: commands.clone(),
                    action,
                    details,
                });
            }
        }
    }

    // Every client's command files first, then every configuration edit, in the order of
    // the clients: Claude Code's, then those of `--client`.
    let mut setup = Setup {
        plan: &mut plan,
        edits: Vec::new(),
    };
    let always = known.iter().copied().filter(|c| c.always());
    for client in always.chain(clients.iter().copied().filter(|c| !c.always())) {
        client.set_up(&mut setup)?;
    }
    let Setup { edits, .. } = setup;
    for edit in edits {
        plan.kept.extend(edit.kept);
        plan.changes.extend(edit.change);
    }

    match direction {
        Direction::Install => record_install(&mut plan, installed),
        Direction::Uninstall => undo_install(&mut plan, installed.as_ref(), &nl_dir, &commands)?,
    }

    if direction == Direction::Install {
        let mut noted: Vec<&C> = known
            .iter()
            .copied()
            .filter(|c| c.always() || clients.contains(c))
            .collect();
        noted.sort_by_key(|c| c.note_rank());
        let notes = noted.into_iter().filter_map(|c| c.left_for_you(user));
        plan.left_for_you.extend(notes);
        if !on_path(&format!("mekara{}", std::env::consts::EXE_SUFFIX)) {
            plan.left_for_you.push(not_on_path().to_string());
        }
    }
    Ok(plan)
}

/// An agent client as install sees it: whether every install sets it up, its step of an
/// install or uninstall, and what it leaves for the person. Install knows no client by name:
/// the agent layer's clients ([`crate::agents::CLIENTS`]) are given to [`plan`], and each
/// one's file in [`crate::agents`] implements its step with [`Setup`].
pub(crate) trait ClientSetup: PartialEq {
    /// Whether every install sets it up, `--client` or not (Claude Code).
    fn always(&self) -> bool;
    /// Its part of `mekara install` and `mekara uninstall`.
    fn set_up(&self, setup: &mut Setup<'_>) -> Result<(), InstallError>;
    /// What an install leaves for the person to do for it (`user`: with `--user`).
    fn left_for_you(&self, user: bool) -> Option<String>;
    /// Where its note goes among the clients' notes (lowest first).
    fn note_rank(&self) -> u8;
}

/// One client's step of an install or uninstall ([`ClientSetup::set_up`]): where and which way,
/// and the plan it adds to. Command files go into the plan at once; configuration edits are
/// queued ([`Setup::edit`]) and follow every client's command files.
pub(crate) struct Setup<'a> {
    plan: &'a mut Plan,
    edits: Vec<Edit>,
}

impl Setup<'_> {
    /// The folder everything is under.
    pub(crate) fn base(&self) -> &Path {
        self.plan.scope.base()
    }

    /// Whether this is an install for every project (`--user`).
    pub(crate) fn user(&self) -> bool {
        matches!(self.plan.scope, Scope::User(_))
    }

    /// Install or uninstall.
    pub(crate) fn direction(&self) -> Direction {
        self.plan.direction
    }

    /// The plan, for command files.
    pub(crate) fn plan(&mut self) -> &mut Plan {
        self.plan
    }

    /// Queues the edit of a configuration file.
    pub(crate) fn edit(&mut self, edit: Edit) {
        self.edits.push(edit);
    }

    /// Queues the adding (or the removal) of the server entry `container.mekara = entry` in
    /// the JSON file at `path` ([`edits::server_entry`]).
    pub(crate) fn server_entry(
        &mut self,
        path: &Path,
        container: &'static str,
        entry: &serde_json::Value,
    ) -> Result<(), InstallError> {
        let edit = edits::server_entry(path, self.direction(), container, entry)?;
        self.edit(edit);
        Ok(())
    }

    /// On install, the command files of the bundled scripts (`files`: Claude Code's) in the
    /// NL scripts folder that `.claude/commands` links to, and the removal of those of
    /// scripts this mekara no longer has. Uninstall removes every generated file already.
    pub(crate) fn bundled_commands(&mut self, files: Vec<CommandFile>) -> Result<(), InstallError> {
        if self.direction() == Direction::Uninstall {
            return Ok(());
        }
        let base = self.base().to_path_buf();
        plan_bundled_commands(
            self.plan,
            &base.join(".claude/commands"),
            &base.join(".mekara/scripts/nl"),
            files,
        )
    }
}

/// Adds to the plan the writing of what it creates and moves into the install record.
fn record_install(plan: &mut Plan, installed: Option<Record>) {
    let base = plan.scope.base().to_path_buf();
    let exists = installed.is_some();
    let before = installed.unwrap_or_default();
    let mut record = before.clone();
    for change in &plan.changes {
        match &change.action {
            Action::CreateDir | Action::Symlink { .. } | Action::Write { created: true, .. } => {
                record.note_created(&base, &change.path);
            }
            Action::MoveAndLink {
                files,
                duplicates,
                into,
                ..
            } => {
                for file in files {
                    record.moved_commands.insert(file.clone());
                    if let Some(parent) = into.join(file).parent() {
                        record.note_created(&base, parent);
                    }
                }
                record.dropped_commands.extend(duplicates.iter().cloned());
            }
            _ => {}
        }
    }
    let path = record::path(&base);
    record.note_created(&base, &path);
    if record != before || (!exists && !plan.changes.is_empty()) {
        plan.changes.push(Change {
            path,
            action: Action::Write {
                text: record.text(),
                created: !exists,
            },
            details: vec!["what install added, so that uninstall removes only that".to_string()],
        });
    }
}

/// Bends an uninstall plan to the install record: a file that was there before install is
/// emptied of mekara's entries, never removed; folders install created go once empty; the
/// record itself goes.
fn undo_install(
    plan: &mut Plan,
    installed: Option<&Record>,
    nl_dir: &Path,
    commands: &Path,
) -> Result<(), InstallError> {
    let base = plan.scope.base().to_path_buf();
    if let Some(record) = installed {
        for change in &mut plan.changes {
            if change.action == Action::Remove && !record.created(&base, &change.path) {
                let empty = if change.path.extension().is_some_and(|e| e == "toml") {
                    ""
                } else {
                    "{}\n"
                };
                change.action = Action::Write {
                    text: empty.to_string(),
                    created: false,
                };
            }
        }
        plan.changes.push(Change {
            path: record::path(&base),
            action: Action::Remove,
            details: Vec::new(),
        });
        let mut gone: std::collections::HashSet<PathBuf> = plan
            .changes
            .iter()
            .filter(|c| {
                matches!(
                    c.action,
                    Action::Remove | Action::RemoveSymlink | Action::RemoveGenerated
                )
            })
            .map(|c| c.path.clone())
            .collect();
        gone.extend(record.moved_commands.iter().map(|f| nl_dir.join(f)));
        let mut dirs: Vec<PathBuf> = record.created.iter().map(|p| base.join(p)).collect();
        // Deepest first, so a folder's emptied subfolders count as gone.
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in dirs {
            let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
            if !is_dir || gone.contains(&dir) {
                continue;
            }
            let empty = std::fs::read_dir(&dir)
                .map_err(io("read", &dir))?
                .flatten()
                .all(|e| gone.contains(&e.path()));
            if empty {
                gone.insert(dir.clone());
                plan.changes.push(Change {
                    path: dir,
                    action: Action::RemoveDir,
                    details: Vec::new(),
                });
            }
        }
    }
    let stays = nl_dir.is_dir()
        && !plan
            .changes
            .iter()
            .any(|c| c.path == nl_dir && c.action == Action::RemoveDir);
    if stays {
        plan.kept.push(format!(
            "`{}` stays: it holds your scripts (move `{}` to `{}` to keep the NL \
             scripts as Claude Code commands)",
            display(&base, &base.join(".mekara")),
            display(&base, nl_dir),
            display(&base, commands),
        ));
    }
    Ok(())
}

/// Plans the command files that make the bundled scripts typeable as `/name`: written where
/// the commands folder links to (the NL scripts folder), refreshed when mekara's text for
/// them changed, and never in place of a file of the person's.
fn plan_bundled_commands(
    plan: &mut Plan,
    commands: &Path,
    nl_dir: &Path,
    current: Vec<CommandFile>,
) -> Result<(), InstallError> {
    let linked = links_to(commands, nl_dir)
        || plan.changes.iter().any(|c| {
            c.path == commands
                && matches!(
                    c.action,
                    Action::Symlink { .. } | Action::MoveAndLink { .. }
                )
        });
    if !linked {
        // plan_link has said why the commands folder is left as it is.
        return Ok(());
    }
    let base = plan.scope.base().to_path_buf();
    // A command for a bundled script this mekara no longer has (an upgrade dropped it).
    for path in generated_files(nl_dir)? {
        if !current.iter().any(|f| nl_dir.join(&f.rel) == path) {
            plan.changes.push(Change {
                path,
                action: Action::RemoveGenerated,
                details: vec!["mekara no longer has that bundled script".to_string()],
            });
        }
    }
    for file in current {
        let path = nl_dir.join(&file.rel);
        // A real commands folder's file of that name is moved into the NL folder by now.
        let theirs = commands.join(&file.rel);
        let moved_in = !links_to(commands, nl_dir) && theirs.exists();
        let exists = path.exists() || moved_in;
        if exists && (moved_in || !commands::is_ours(&path)) {
            plan.kept.push(format!(
                "`{}` is your own script: left as is, and `/{}` runs it instead of the bundled one",
                display(&base, &path),
                file.rel
                    .with_extension("")
                    .display()
                    .to_string()
                    .replace('/', ":")
            ));
            continue;
        }
        if exists && std::fs::read_to_string(&path).is_ok_and(|t| t == file.text) {
            continue;
        }
        plan.changes.push(Change {
            path,
            action: Action::Write {
                text: file.text,
                created: !exists,
            },
            details: vec![format!(
                "the command `/{}` for the bundled script",
                file.rel
                    .with_extension("")
                    .display()
                    .to_string()
                    .replace('/', ":")
            )],
        });
    }
    Ok(())
}

/// The command files install generated under the NL scripts folder.
pub(crate) fn generated_files(nl_dir: &Path) -> Result<Vec<PathBuf>, InstallError> {
    let mut files = Vec::new();
    if nl_dir.is_dir() {
        walk(nl_dir, Path::new(""), &mut files)?;
    }
    Ok(files
        .into_iter()
        .map(|f| nl_dir.join(f))
        .filter(|p| commands::is_ours(p))
        .collect())
}

/// Plans `.claude/commands` → the NL scripts folder.
fn plan_link(
    plan: &mut Plan,
    commands: &Path,
    nl_dir: &Path,
    target: &Path,
) -> Result<(), InstallError> {
    let base = plan.scope.base().to_path_buf();
    let meta = match std::fs::symlink_metadata(commands) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            plan.changes.push(Change {
                path: commands.to_path_buf(),
                action: Action::Symlink {
                    target: target.to_path_buf(),
                },
                details: Vec::new(),
            });
            return Ok(());
        }
        Err(e) => return Err(io("read", commands)(e)),
    };
    if meta.file_type().is_symlink() {
        if !links_to(commands, nl_dir) {
            let to = std::fs::read_link(commands).map_err(io("read", commands))?;
            plan.kept.push(format!(
                "`{}` links to `{}`, not to mekara's NL scripts: left as is, so Claude Code \
                 does not offer mekara's scripts as slash commands",
                display(&base, commands),
                to.display()
            ));
        }
        return Ok(());
    }
    if !meta.is_dir() {
        plan.kept.push(format!(
            "`{}` is a file, not a folder: left as is, so Claude Code does not offer mekara's \
             scripts as slash commands",
            display(&base, commands)
        ));
        return Ok(());
    }
    let mut files = Vec::new();
    walk(commands, Path::new(""), &mut files)?;
    let mut duplicates = Vec::new();
    for file in &files {
        let ours = nl_dir.join(file);
        if ours.exists() {
            let theirs = commands.join(file);
            let same = std::fs::read(&ours).map_err(io("read", &ours))?
                == std::fs::read(&theirs).map_err(io("read", &theirs))?;
            if !same {
                return Err(InstallError::CommandClash { theirs, ours });
            }
            duplicates.push(file.clone());
        }
    }
    files.retain(|f| !duplicates.contains(f));
    let mut details: Vec<String> = files
        .iter()
        .map(|f| format!("moved `{}` into `{}`", f.display(), display(&base, nl_dir)))
        .collect();
    details.extend(duplicates.iter().map(|f| {
        format!(
            "dropped `{}`: the same file is in `{}`",
            f.display(),
            display(&base, nl_dir)
        )
    }));
    plan.changes.push(Change {
        path: commands.to_path_buf(),
        action: Action::MoveAndLink {
            files,
            duplicates,
            into: nl_dir.to_path_buf(),
            target: target.to_path_buf(),
        },
        details,
    });
    Ok(())
}

/// Every file under `dir`, relative to the folder walked from.
fn walk(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<(), InstallError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io("read", dir))?
        .collect::<Result<_, _>>()
        .map_err(io("read", dir))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        let rel = rel.join(entry.file_name());
        if entry.file_type().map_err(io("read", &path))?.is_dir() {
            walk(&path, &rel, out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
}

/// Whether `link` is a symlink that resolves to `dir`.
fn links_to(link: &Path, dir: &Path) -> bool {
    let is_link = std::fs::symlink_metadata(link).is_ok_and(|m| m.file_type().is_symlink());
    is_link
        && match (link.canonicalize(), dir.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            // Not created yet (a dry run): compare what the link says.
            _ => std::fs::read_link(link)
                .is_ok_and(|to| link.parent().map(|p| p.join(&to)) == Some(dir.to_path_buf())),
        }
}

/// What to do when `mekara` (`mekara.exe`) is not on `PATH`. On Windows npm puts only
/// `mekara.cmd` there, which a client that starts programs without a shell never finds.
fn not_on_path() -> &'static str {
    if cfg!(windows) && on_path("mekara.cmd") {
        "put `mekara.exe` on your PATH: npm's `mekara.cmd` is there, but a client that starts \
         `mekara` without a shell (Codex) finds only a `.exe`; add the folder of the npm \
         package's `mekara.exe` (`node_modules\\@mekara-dev\\mekara-win32-x64\\bin` in npm's \
         global folder) to PATH, or install with `pipx install mekara-cli`"
    } else {
        "put `mekara` on your PATH: the clients run `mekara mcp` and the hooks run \
         `mekara hook ...`"
    }
}

/// Whether the executable file `file` is in a folder of `PATH`.
fn on_path(file: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            std::fs::metadata(dir.join(file)).is_ok_and(|m| m.is_file() && executable(&m))
        })
    })
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0
}

/// Windows has no execute bit: a `.exe` (or a `.cmd`) is a program.
#[cfg(windows)]
fn executable(_meta: &std::fs::Metadata) -> bool {
    true
}

/// Makes the changes of `plan`, in order; what the person should know of how they were
/// made (a junction where Windows refused a link) comes back, a line each.
pub(crate) fn apply(plan: &Plan) -> Result<Vec<String>, InstallError> {
    let mut notes = Vec::new();
    let mut link = |target: &Path, path: &Path| -> Result<(), InstallError> {
        if let Linked::Junction = symlink(target, path)? {
            notes.push(format!(
                "`{}` is a junction, not a symbolic link: Windows allows those only in \
                 Developer Mode or to an administrator; it names `{}` by its full path, so \
                 after moving the project run `mekara install` again",
                display(plan.scope.base(), path),
                display(
                    plan.scope.base(),
                    &path.parent().unwrap_or(path).join(target)
                ),
            ));
        }
        Ok(())
    };
    for change in &plan.changes {
        let path = &change.path;
        match &change.action {
            Action::CreateDir => std::fs::create_dir_all(path).map_err(io("create", path))?,
            Action::Symlink { target } => link(target, path)?,
            Action::MoveAndLink {
                files,
                duplicates,
                into,
                target,
            } => {
                for file in files {
                    let to = into.join(file);
                    if let Some(parent) = to.parent() {
                        std::fs::create_dir_all(parent).map_err(io("create", parent))?;
                    }
                    std::fs::rename(path.join(file), &to).map_err(io("move", &to))?;
                }
                for file in duplicates {
                    let dup = path.join(file);
                    std::fs::remove_file(&dup).map_err(io("remove", &dup))?;
                }
                // Only empty folders are left; `remove_dir_all` would also take anything that
                // appeared since the plan, so remove them one by one.
                remove_empty_dirs(path)?;
                link(target, path)?;
            }
            Action::RemoveSymlink => remove_link(path)?,
            Action::RemoveGenerated => {
                std::fs::remove_file(path).map_err(io("remove", path))?;
            }
            Action::RestoreCommands {
                files,
                dropped,
                from,
            } => {
                remove_link(path)?;
                std::fs::create_dir(path).map_err(io("create", path))?;
                for (file, moved) in files
                    .iter()
                    .map(|f| (f, true))
                    .chain(dropped.iter().map(|f| (f, false)))
                {
                    let (src, to) = (from.join(file), path.join(file));
                    if !src.is_file() {
                        continue;
                    }
                    if let Some(parent) = to.parent() {
                        std::fs::create_dir_all(parent).map_err(io("create", parent))?;
                    }
                    if moved {
                        std::fs::rename(&src, &to).map_err(io("move", &to))?;
                    } else {
                        std::fs::copy(&src, &to).map_err(io("copy", &to))?;
                    }
                }
            }
            // A folder that is no longer empty (something appeared since the plan) stays.
            Action::RemoveDir => {
                let _ = std::fs::remove_dir(path);
            }
            Action::Write { text, .. } => write_atomically(path, text)?,
            Action::Remove => {
                std::fs::remove_file(path).map_err(io("remove", path))?;
                // A folder install created for the file (`.codex/`) goes with it; one that
                // still holds anything fails to be removed, which is what should happen.
                if let Some(parent) = path.parent().filter(|p| *p != plan.scope.base()) {
                    let _ = std::fs::remove_dir(parent);
                }
            }
        }
    }
    Ok(notes)
}

fn remove_empty_dirs(dir: &Path) -> Result<(), InstallError> {
    for entry in std::fs::read_dir(dir).map_err(io("read", dir))? {
        let entry = entry.map_err(io("read", dir))?;
        if entry.file_type().map_err(io("read", dir))?.is_dir() {
            remove_empty_dirs(&entry.path())?;
        }
    }
    std::fs::remove_dir(dir).map_err(io("remove", dir))
}

/// How [`symlink`] linked a folder.
enum Linked {
    /// With a symbolic link.
    Symlink,
    /// With a junction (Windows, where the person may not make symbolic links).
    #[cfg_attr(not(windows), allow(dead_code))]
    Junction,
}

fn symlink(target: &Path, link: &Path) -> Result<Linked, InstallError> {
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent).map_err(io("create", parent))?;
    }
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink(target, link).map(|()| Linked::Symlink);
    // A folder's link; Windows lets a user make one in Developer Mode or as an
    // administrator, and anyone a junction.
    #[cfg(windows)]
    let made = match std::os::windows::fs::symlink_dir(target, link) {
        Err(e)
            if e.raw_os_error()
                == i32::try_from(windows_sys::Win32::Foundation::ERROR_PRIVILEGE_NOT_HELD).ok() =>
        {
            junction::make(target, link).map(|()| Linked::Junction)
        }
        made => made.map(|()| Linked::Symlink),
    };
    made.map_err(io("link", link))
}

/// Removes the link install made: a symbolic link, or on Windows a folder's link or
/// junction, which the system removes as a folder (leaving what it points at alone).
fn remove_link(path: &Path) -> Result<(), InstallError> {
    let removed = std::fs::remove_file(path);
    #[cfg(windows)]
    let removed = removed.or_else(|_| std::fs::remove_dir(path));
    removed.map_err(io("remove", path))
}

/// Writes through a temporary file in the same folder and a rename, so a crash leaves the
/// old file or the new one, never half of one.
fn write_atomically(path: &Path, text: &str) -> Result<(), InstallError> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io("create", parent))?;
    // A file opened the ordinary way gets the mode any new file of the person gets (0666
    // less the umask); a `tempfile` would be 0600, and a new `.mcp.json` private.
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = parent.join(format!(".{name}.mekara-{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.sync_all()?;
        if let Ok(meta) = std::fs::metadata(path) {
            // An edited file keeps its mode (`~/.claude.json` is private).
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io("write", path))
}

/// `path` relative to `base` when it is inside it, with the machine's own separator (the
/// plan joins fixed parts written with `/`, which Windows reads but does not write).
pub(crate) fn display(base: &Path, path: &Path) -> String {
    let shown = path
        .strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string();
    if cfg!(windows) {
        shown.replace('/', "\\")
    } else {
        shown
    }
}

/// The plan as the person reads it; `dry_run` words it as what would happen.
pub(crate) struct Report<'a> {
    /// The plan.
    pub plan: &'a Plan,
    /// Whether nothing was applied.
    pub dry_run: bool,
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plan = self.plan;
        let base = plan.scope.base();
        let (what, verb) = match plan.direction {
            Direction::Install => ("install", "installed"),
            Direction::Uninstall => ("uninstall", "uninstalled"),
        };
        let scope = match &plan.scope {
            Scope::Project(p) => format!("project `{}`", p.display()),
            Scope::User(p) => format!("user `{}`", p.display()),
        };
        if plan.changes.is_empty() {
            writeln!(
                f,
                "mekara {what} ({scope}): nothing to change, already {verb}"
            )?;
        } else {
            let dry = if self.dry_run {
                ", dry run: nothing was changed"
            } else {
                ""
            };
            writeln!(f, "mekara {what} ({scope}{dry}):")?;
        }
        for change in &plan.changes {
            let path = display(base, &change.path);
            let would = |done: &str, planned: &str| {
                if self.dry_run {
                    planned.to_string()
                } else {
                    done.to_string()
                }
            };
            let line = match &change.action {
                Action::CreateDir => format!("{} {path}/", would("created", "would create")),
                Action::Symlink { target } => {
                    format!(
                        "{} {path} -> {}",
                        would("linked", "would link"),
                        target.display()
                    )
                }
                Action::MoveAndLink { target, .. } => format!(
                    "{} the folder {path} by a link -> {}",
                    would("replaced", "would replace"),
                    target.display()
                ),
                Action::RemoveSymlink => {
                    format!("{} the link {path}", would("removed", "would remove"))
                }
                Action::RestoreCommands { .. } => format!(
                    "{} the link {path} by the folder it was",
                    would("replaced", "would replace")
                ),
                Action::RemoveDir => format!(
                    "{} {path}/ (install created it; it is empty now)",
                    would("removed", "would remove")
                ),
                Action::Write { created: true, .. } => {
                    format!("{} {path}", would("created", "would create"))
                }
                Action::Write { created: false, .. } => {
                    format!("{} {path}", would("updated", "would update"))
                }
                Action::RemoveGenerated => format!(
                    "{} {path} (a command install wrote)",
                    would("removed", "would remove")
                ),
                Action::Remove => format!(
                    "{} {path} (it held only mekara's entries)",
                    would("removed", "would remove")
                ),
            };
            writeln!(f, "  {line}")?;
            for detail in &change.details {
                writeln!(f, "      {detail}")?;
            }
        }
        for kept in &plan.kept {
            writeln!(f, "  note: {kept}")?;
        }
        if !plan.left_for_you.is_empty() {
            writeln!(f, "Left for you:")?;
            for item in &plan.left_for_you {
                writeln!(f, "  - {item}")?;
            }
        }
        Ok(())
    }
}
