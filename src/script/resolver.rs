//! `Resolver`: finds a script by name at the project, user and bundled levels.
//!
//! At each filesystem level two layouts are read:
//! - mekara's: `scripts/nl/<name>.md` and `scripts/compiled/<name>.star`;
//! - Agent Skills: `.agents/skills/<name>/SKILL.md` with `mekara.star` beside it.
//!
//! The NL file decides the level (first level that has one wins). The compiled file is taken
//! from that level or a higher one, never a lower one, so a project's own NL script is never
//! paired with a bundled compiled script written for different instructions.

use crate::exit::Exit;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use super::bundled;
use super::name::{NameError, ScriptName};
use super::nl::NlText;
use crate::paths::Locations;

/// Where a script file was found, highest precedence first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub(crate) enum Level {
    /// `<project>/.mekara/` or `<project>/.agents/skills/`.
    Project,
    /// `~/.mekara/` or `~/.agents/skills/`.
    User,
    /// Compiled into the binary.
    Bundled,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Project => "project",
            Level::User => "user",
            Level::Bundled => "bundled",
        })
    }
}

/// One file of a script, read.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct ScriptFile {
    /// The level it came from.
    pub level: Level,
    /// Its path on disk, or `bundled:<path>` for a bundled file.
    pub origin: String,
    /// Its text.
    pub text: String,
}

/// A resolved script: its NL file and, if it has one at an allowed level, its compiled file.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    /// The name as found (after `-`→`_` if that is what matched).
    pub name: ScriptName,
    /// The NL instructions.
    pub nl: ScriptFile,
    /// The Starlark program, when the script is compiled.
    pub compiled: Option<ScriptFile>,
}

impl Script {
    /// The NL instructions with `arguments` substituted.
    pub(crate) fn instructions(&self, arguments: &str) -> String {
        NlText::parse(&self.nl.text).instructions(arguments)
    }

    /// The one-line description.
    pub(crate) fn description(&self) -> String {
        NlText::parse(&self.nl.text).description()
    }
}

/// Which scripts a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    /// The scripts a user works with: every script but the bundled demos (`test:*`).
    Usual,
    /// Every script, the bundled demos too.
    All,
}

impl Listing {
    /// [`Listing::All`] when `all`, else [`Listing::Usual`].
    pub(crate) fn all_if(all: bool) -> Listing {
        if all { Listing::All } else { Listing::Usual }
    }

    fn shows(self, level: Level, name: &ScriptName) -> bool {
        self == Listing::All || !(level == Level::Bundled && bundled::is_demo(name.as_path()))
    }
}

/// A script as listed by `mekara scripts`.
#[derive(Debug, Clone)]
pub(crate) struct ScriptEntry {
    /// Its name.
    pub name: ScriptName,
    /// The level its NL file is at.
    pub level: Level,
    /// Whether it resolves to a compiled script.
    pub compiled: bool,
    /// Its one-line description.
    pub description: String,
}

/// Why a script could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScriptError {
    /// The name itself is refused.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// No level has the script.
    #[error("script `{name}` not found{}{}{}", searched.outside_project(), did_you_mean(.suggestions), orphan.as_ref().map(|o| format!(": {o}")).unwrap_or_default())]
    NotFound {
        /// The name as asked for.
        name: String,
        /// Existing names close to it, best first.
        suggestions: Vec<String>,
        /// A compiled file of that name that has no NL file.
        orphan: Option<Box<Orphan>>,
        /// Where it was looked for.
        searched: Box<Searched>,
    },
    /// A file exists but cannot be read.
    #[error("cannot read `{}`: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The name is one of mekara's bundled scripts, but here it resolves to the project's own
    /// files, and the person has not said to run those.
    #[error(transparent)]
    Shadows(Box<Shadowing>),
}

impl ScriptError {
    /// A script that cannot be had is a wrong name or path given: [`Exit::Usage`].
    pub(crate) fn exit_code(&self) -> Exit {
        Exit::Usage
    }
}

/// A project's own script that has the name of one of mekara's bundled scripts, so that the
/// name runs the project's files instead of mekara's: a cloned repository can hold one, and
/// its steps run only on the person's word ([`Resolver::resolve_to_run`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{name}` here is this project's own script ({}), not mekara's bundled `{bundled}`; nothing of it ran; {}",
    self.files_named(),
    self.what_runs()
)]
pub(crate) struct Shadowing {
    /// The name as asked for.
    pub name: String,
    /// The bundled script's name.
    pub bundled: String,
    /// The project's files that would run, NL file first.
    pub files: Vec<String>,
    /// The file whose steps would run: the compiled file when there is one (whatever the NL
    /// file says), else the NL file, which the agent follows.
    pub runs: String,
    /// Whether `runs` is a compiled file.
    pub compiled: bool,
}

impl Shadowing {
    /// Which file's steps would run, for the person who reads the files before saying yes:
    /// an NL file and a compiled file can say different things, and only one of them runs.
    pub(crate) fn what_runs(&self) -> String {
        if self.compiled && !self.files.iter().any(|f| f != &self.runs) {
            // The NL text beside it is mekara's own, which describes the bundled workflow.
            format!(
                "what would run is the steps of its compiled file `{}`, not what the bundled NL text of `{}` describes",
                self.runs, self.bundled
            )
        } else if self.compiled {
            format!(
                "what would run is the steps of its compiled file `{}` (its NL file only describes them, and may say otherwise)",
                self.runs
            )
        } else {
            format!(
                "what would run is its NL file `{}`, followed by the agent",
                self.runs
            )
        }
    }

    /// How to have the bundled script back under its name.
    pub(crate) fn way_back(&self) -> String {
        format!(
            "mekara's bundled `{}` runs under that name again once the project's files are \
             moved out of the project or renamed",
            self.bundled
        )
    }

    /// The project's files, each in backticks: `` `a.md` and `b.star` ``.
    pub(crate) fn files_named(&self) -> String {
        self.files
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(" and ")
    }
}

/// Why the helper module a `load` statement names could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HelperError {
    /// The path is not a helper module path.
    #[error("`{path}` is not a helper module path: {reason}")]
    BadPath {
        /// The path as written in `load`.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The script's level has no such file.
    #[error("helper module `{path}` not found: there is no `{looked}`{}", elsewhere.as_ref().map(|e| format!(" (there is `{e}`, at another level)")).unwrap_or_default())]
    NotFound {
        /// The path as written in `load`.
        path: String,
        /// The file it names at the script's level.
        looked: String,
        /// The same helper at another level, which the script cannot load.
        elsewhere: Option<String>,
    },
    /// The file exists but cannot be read.
    #[error("cannot read `{}`: {source}", .file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
}

impl HelperError {
    /// What to do about it.
    pub(crate) fn hint(&self) -> &'static str {
        match self {
            HelperError::BadPath { .. } => {
                "load a helper as `//lib/<path>.star`: the file `scripts/lib/<path>.star` of the \
                 script's own level"
            }
            HelperError::NotFound { .. } => {
                "write the helper there or fix the path; a script loads helpers from the \
                 `scripts/lib/` folder of its own level only (project, user or bundled)"
            }
            HelperError::Read { .. } => "make the file readable",
        }
    }
}

/// How a `load` path starts: the `scripts/` folder of the loading script's level.
const HELPER_ROOT: &str = "//";

/// The folder of helper modules in a level's `scripts/` folder.
const HELPER_FOLDER: &str = "lib/";

/// The file a helper path (`//lib/text/wrap.star`) names under a level's `scripts/` folder
/// (`lib/text/wrap.star`), or why it names none: the path must stay inside `scripts/lib/`.
fn helper_file(path: &str) -> Result<String, HelperError> {
    let refuse = |reason: &str| HelperError::BadPath {
        path: path.to_string(),
        reason: reason.to_string(),
    };
    let Some(relative) = path.strip_prefix(HELPER_ROOT) else {
        return Err(refuse(if path.starts_with('/') {
            "an absolute path is not allowed"
        } else {
            "a path relative to the loading file is not supported"
        }));
    };
    if relative.split('/').any(|part| part == ".." || part == ".") {
        return Err(refuse(
            "`.` and `..` are not allowed: a helper path stays inside `scripts/lib/`",
        ));
    }
    if relative.contains(':') {
        return Err(refuse("`:` is not allowed; separate folders with `/`"));
    }
    let name = ScriptName::parse(relative).map_err(|e| refuse(&e.reason))?;
    let file = name.as_path();
    if !file.starts_with(HELPER_FOLDER) {
        return Err(refuse("helper modules live in `lib/`"));
    }
    if file
        .strip_suffix(".star")
        .is_none_or(|stem| stem.len() <= HELPER_FOLDER.len())
    {
        return Err(refuse("a helper module is a `.star` file"));
    }
    Ok(file.to_string())
}

/// A compiled file that no NL file pairs with: no name resolves to it, so it never runs.
#[derive(Debug, Clone, thiserror::Error)]
#[error("`{}` has no `{}` beside it", .compiled.display(), .nl_beside)]
pub(crate) struct Orphan {
    /// The script's name.
    pub name: ScriptName,
    /// The compiled file.
    pub compiled: PathBuf,
    /// Where its NL file belongs.
    pub nl: PathBuf,
    /// The NL file's path from the scripts folder (`nl/<name>.md`, or `SKILL.md`).
    pub nl_beside: String,
}

/// Where a name was looked for: the facts a "not found" states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Searched {
    /// The folder a project was looked for from, and above (the current directory).
    pub from: PathBuf,
    /// The project root found there, if any.
    pub project_root: Option<PathBuf>,
    /// The user level's folder (`~/.mekara`), when `HOME` is set.
    pub user_dir: Option<PathBuf>,
}

impl Searched {
    /// Whether no project was found, so only the user and bundled levels were searched.
    pub(crate) fn is_outside_project(&self) -> bool {
        self.project_root.is_none()
    }

    /// `: no project folder in X or above it, so only ... were searched` outside a project;
    /// empty inside one, where the levels searched are the usual three.
    fn outside_project(&self) -> String {
        if !self.is_outside_project() {
            return String::new();
        }
        let levels = match &self.user_dir {
            Some(user) => format!(
                "the user level `{}` and the bundled scripts were",
                user.display()
            ),
            None => "the bundled scripts were (`HOME` is not set)".to_string(),
        };
        format!(
            ": no `.mekara/` or `.claude/` folder in `{}` or above it, so only {levels} \
             searched",
            self.from.display()
        )
    }
}

/// `; did you mean …?` when there are names close to the one asked for. Where to list the
/// scripts there are is the caller's to say: the CLI and MCP name different ways.
fn did_you_mean(suggestions: &[String]) -> String {
    match suggestions {
        [] => String::new(),
        [one] => format!("; did you mean `{one}`?"),
        many => format!(
            "; did you mean one of {}?",
            many.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A filesystem level: the folder holding `scripts/`, and the Agent Skills folder.
#[derive(Debug, Clone)]
struct Root {
    level: Level,
    mekara_dir: PathBuf,
    skills_dir: PathBuf,
}

/// Finds scripts by name; built once from the [`Locations`] of the process.
#[derive(Debug, Clone)]
pub(crate) struct Resolver {
    roots: Vec<Root>,
    searched: Searched,
}

impl Resolver {
    /// A resolver over the project and user levels of `locations`, then the bundled scripts.
    pub(crate) fn new(locations: &Locations) -> Resolver {
        let mut roots = Vec::new();
        if let Some(root) = &locations.project_root {
            roots.push(Root {
                level: Level::Project,
                mekara_dir: root.join(".mekara"),
                skills_dir: root.join(".agents").join("skills"),
            });
        }
        if let Some(home) = &locations.home {
            roots.push(Root {
                level: Level::User,
                mekara_dir: home.join(".mekara"),
                skills_dir: home.join(".agents").join("skills"),
            });
        }
        Resolver {
            roots,
            searched: Searched {
                from: locations.cwd.clone(),
                project_root: locations.project_root.clone(),
                user_dir: locations.user_dir(),
            },
        }
    }

    /// This resolver with `mekara_dir` (a folder holding `scripts/`) searched before every
    /// other level, as a project's own: an eval's baseline (`mekara eval --baseline`) runs
    /// the script's NL file alone, or its files at a git ref, from such a folder. A compiled
    /// file pairs only with an NL file of its own level or a higher one, so a folder with an
    /// NL file alone runs it as an NL script.
    pub(crate) fn preferring(mut self, mekara_dir: &Path) -> Resolver {
        self.roots.insert(
            0,
            Root {
                level: Level::Project,
                mekara_dir: mekara_dir.to_path_buf(),
                skills_dir: mekara_dir.join("skills"),
            },
        );
        self
    }

    /// Resolves `raw` (`test/random`, `test:random`, `test:double_or_nothing`, ...).
    pub(crate) fn resolve(&self, raw: &str) -> Result<Script, ScriptError> {
        let name = ScriptName::parse(raw)?;
        let forms: Vec<ScriptName> = std::iter::once(name.clone())
            .chain(name.underscored())
            .collect();
        let levels = self.roots.len() + 1;
        for at in 0..levels {
            for form in &forms {
                if let Some(nl) = self.nl_file(at, form)? {
                    let compiled = self.compiled_file(at, &forms)?;
                    return Ok(Script {
                        name: form.clone(),
                        nl,
                        compiled,
                    });
                }
            }
        }
        Err(ScriptError::NotFound {
            name: raw.to_string(),
            suggestions: self.suggestions(&name),
            orphan: self
                .orphans()
                .into_iter()
                .find(|o| forms.contains(&o.name))
                .map(Box::new),
            searched: Box::new(self.searched.clone()),
        })
    }

    /// Resolves `raw` to run it: as [`Resolver::resolve`], but a project's own script that
    /// has the name of a bundled one is refused ([`ScriptError::Shadows`]) unless
    /// `project_script` says the person agreed to run it.
    pub(crate) fn resolve_to_run(
        &self,
        raw: &str,
        project_script: bool,
    ) -> Result<Script, ScriptError> {
        let script = self.resolve(raw)?;
        match self.shadowing(raw, &script) {
            Some(shadowing) if !project_script => Err(ScriptError::Shadows(Box::new(shadowing))),
            _ => Ok(script),
        }
    }

    /// How `script`, resolved from `raw`, shadows a bundled script: when one of its files is
    /// the project's and mekara bundles a script of that name (as written, or with `-` read
    /// as `_`). A project's compiled file paired with the bundled NL file counts too: it is
    /// what would run. The user level does not: `~/.mekara` is the person's own folder,
    /// which a cloned repository does not write.
    pub(crate) fn shadowing(&self, raw: &str, script: &Script) -> Option<Shadowing> {
        let files: Vec<String> = std::iter::once(&script.nl)
            .chain(script.compiled.as_ref())
            .filter(|f| f.level == Level::Project)
            .map(|f| f.origin.clone())
            .collect();
        if files.is_empty() {
            return None;
        }
        let name = ScriptName::parse(raw).ok()?;
        let bundled = std::iter::once(name.clone())
            .chain(name.underscored())
            .chain(std::iter::once(script.name.clone()))
            .find(|form| bundled::file(&format!("nl/{}.md", form.as_path())).is_some())?;
        let runs = script.compiled.as_ref().unwrap_or(&script.nl);
        Some(Shadowing {
            name: name.to_string(),
            bundled: bundled.to_string(),
            files,
            runs: runs.origin.clone(),
            compiled: script.compiled.is_some(),
        })
    }

    /// The compiled files of the project and user levels that no NL file pairs with: none
    /// at their own level, nor at a lower one (which would take a compiled file from a
    /// higher level).
    pub(crate) fn orphans(&self) -> Vec<Orphan> {
        let mut found = Vec::new();
        for (at, root) in self.roots.iter().enumerate() {
            let compiled_dir = root.mekara_dir.join("scripts").join("compiled");
            let layouts = [
                (ListMode::Compiled, &compiled_dir),
                (ListMode::SkillsCompiled, &root.skills_dir),
            ];
            for (mode, dir) in layouts {
                for name in list_files(dir, mode) {
                    let paired = (at..=self.roots.len())
                        .any(|k| self.nl_file(k, &name).ok().flatten().is_some());
                    if paired {
                        continue;
                    }
                    let (compiled, nl, nl_beside) = match mode {
                        ListMode::Compiled => (
                            compiled_dir.join(format!("{}.star", name.as_path())),
                            root.mekara_dir
                                .join("scripts/nl")
                                .join(format!("{}.md", name.as_path())),
                            format!("nl/{}.md", name.as_path()),
                        ),
                        _ => (
                            root.skills_dir.join(name.as_path()).join("mekara.star"),
                            root.skills_dir.join(name.as_path()).join("SKILL.md"),
                            "SKILL.md".to_string(),
                        ),
                    };
                    found.push(Orphan {
                        name,
                        compiled,
                        nl,
                        nl_beside,
                    });
                }
            }
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        found
    }

    /// Every script that resolves, by name; a name at several levels is listed once, at
    /// the level that wins. A bundled demo is left out unless `listing` is [`Listing::All`]
    /// (a project's or user's own `test/...` script is theirs, and listed).
    pub(crate) fn list(&self, listing: Listing) -> Vec<ScriptEntry> {
        let mut names: Vec<(ScriptName, usize)> = Vec::new();
        for (at, root) in self.roots.iter().enumerate() {
            for name in list_files(
                &root.mekara_dir.join("scripts").join("nl"),
                ListMode::Markdown,
            )
            .into_iter()
            .chain(list_files(&root.skills_dir, ListMode::Skills))
            {
                names.push((name, at));
            }
        }
        for f in bundled::FILES {
            if let Some(n) = f
                .path
                .strip_prefix("nl/")
                .and_then(|p| p.strip_suffix(".md"))
                && let Ok(name) = ScriptName::parse(n)
            {
                names.push((name, self.roots.len()));
            }
        }
        names.sort();
        names.dedup_by(|later, first| later.0 == first.0);
        names
            .into_iter()
            .filter_map(|(name, _)| {
                let script = self.resolve(name.as_path()).ok()?;
                if !listing.shows(script.nl.level, &name) {
                    return None;
                }
                Some(ScriptEntry {
                    description: script.description(),
                    level: script.nl.level,
                    compiled: script.compiled.is_some(),
                    name,
                })
            })
            .collect()
    }

    /// The name of the script whose file `path` would be, by its place in a scripts folder
    /// (`…/scripts/nl/<name>.md`, `…/scripts/compiled/<name>.star`,
    /// `…/skills/<name>/SKILL.md` or `mekara.star`), whichever level that folder is at.
    pub(crate) fn name_of_file(path: &Path) -> Option<ScriptName> {
        let parts: Vec<&str> = path
            .components()
            .map(|c| c.as_os_str().to_str())
            .collect::<Option<_>>()?;
        let file = *parts.last()?;
        let name = if let Some(at) = parts
            .windows(2)
            .rposition(|w| w[0] == "scripts" && (w[1] == "nl" || w[1] == "compiled"))
        {
            let extension = if parts[at + 1] == "nl" {
                ".md"
            } else {
                ".star"
            };
            let mut name = parts[at + 2..].join("/");
            name.truncate(name.strip_suffix(extension)?.len());
            name
        } else if file == "SKILL.md" || file == "mekara.star" {
            let at = parts.iter().rposition(|p| *p == "skills")?;
            parts[at + 1..parts.len() - 1].join("/")
        } else {
            return None;
        };
        ScriptName::parse(&name).ok()
    }

    /// The helper module `path` (`//lib/helpers.star`, as a `load` statement writes it) of
    /// a script at `level`: the file `scripts/lib/helpers.star` of that level. A script
    /// loads helpers from its own level only, so what it runs does not change when a file
    /// at another level does.
    pub(crate) fn helper(&self, level: Level, path: &str) -> Result<ScriptFile, HelperError> {
        let file = helper_file(path)?;
        let at = self
            .roots
            .iter()
            .position(|r| r.level == level)
            .unwrap_or(self.roots.len());
        if let Some(found) = self.helper_at(at, &file)? {
            return Ok(found);
        }
        let elsewhere = (0..=self.roots.len())
            .filter(|&k| k != at)
            .find_map(|k| self.helper_at(k, &file).ok().flatten())
            .map(|f| f.origin);
        Err(HelperError::NotFound {
            path: path.to_string(),
            looked: self.helper_origin(at, &file),
            elsewhere,
        })
    }

    /// The level whose folders hold the file at `path`; a file in none of them is taken as
    /// the project's (or, outside a project, the user's).
    pub(crate) fn level_of_file(&self, path: &Path) -> Level {
        let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let file = real(path);
        self.roots
            .iter()
            .find(|r| {
                file.starts_with(real(&r.mekara_dir)) || file.starts_with(real(&r.skills_dir))
            })
            .or_else(|| self.roots.first())
            .map_or(Level::Bundled, |r| r.level)
    }

    /// Where helper `file` (`lib/x.star`) of the level at `at` is, as an origin.
    fn helper_origin(&self, at: usize, file: &str) -> String {
        match self.roots.get(at) {
            Some(root) => root
                .mekara_dir
                .join("scripts")
                .join(file)
                .display()
                .to_string(),
            None => format!("bundled:{file}"),
        }
    }

    fn helper_at(&self, at: usize, file: &str) -> Result<Option<ScriptFile>, HelperError> {
        match self.roots.get(at) {
            Some(root) => {
                let path = root.mekara_dir.join("scripts").join(file);
                read_file(root.level, &path)
                    .map_err(|source| HelperError::Read { file: path, source })
            }
            None => Ok(bundled_file(file)),
        }
    }

    fn level(&self, at: usize) -> Level {
        self.roots.get(at).map_or(Level::Bundled, |r| r.level)
    }

    fn nl_file(&self, at: usize, name: &ScriptName) -> Result<Option<ScriptFile>, ScriptError> {
        match self.roots.get(at) {
            Some(root) => first_file(
                root.level,
                &[
                    root.mekara_dir
                        .join("scripts/nl")
                        .join(format!("{}.md", name.as_path())),
                    root.skills_dir.join(name.as_path()).join("SKILL.md"),
                ],
            ),
            None => Ok(bundled_file(&format!("nl/{}.md", name.as_path()))),
        }
    }

    /// The compiled file from the highest level down to `nl_at`, inclusive.
    fn compiled_file(
        &self,
        nl_at: usize,
        forms: &[ScriptName],
    ) -> Result<Option<ScriptFile>, ScriptError> {
        for at in 0..=nl_at {
            for form in forms {
                let found = match self.roots.get(at) {
                    Some(root) => first_file(
                        self.level(at),
                        &[
                            root.mekara_dir
                                .join("scripts/compiled")
                                .join(format!("{}.star", form.as_path())),
                            root.skills_dir.join(form.as_path()).join("mekara.star"),
                        ],
                    )?,
                    None => bundled_file(&format!("compiled/{}.star", form.as_path())),
                };
                if found.is_some() {
                    return Ok(found);
                }
            }
        }
        Ok(None)
    }

    fn suggestions(&self, name: &ScriptName) -> Vec<String> {
        let wanted = name.as_path();
        // Demos too: `tset/random` is close to the quick start's `test/random`.
        let mut scored: Vec<(usize, String)> = self
            .list(Listing::All)
            .into_iter()
            .filter_map(|e| {
                let candidate = e.name.as_path();
                let distance = strsim::damerau_levenshtein(wanted, candidate);
                let last_part_matches = candidate.rsplit('/').next() == wanted.rsplit('/').next();
                (distance <= (wanted.len() / 3).max(2) || last_part_matches)
                    .then(|| (distance, e.name.to_string()))
            })
            .collect();
        scored.sort();
        scored.into_iter().take(3).map(|(_, n)| n).collect()
    }
}

fn first_file(level: Level, candidates: &[PathBuf]) -> Result<Option<ScriptFile>, ScriptError> {
    for path in candidates {
        let found = read_file(level, path).map_err(|source| ScriptError::Read {
            path: path.clone(),
            source,
        })?;
        match found {
            // A command file install generated for a bundled script stands for that script:
            // read past it, so the bundled script (and its compiled file) is the one found.
            Some(file) if super::nl::is_generated(&file.text) => {}
            Some(file) => return Ok(Some(file)),
            None => {}
        }
    }
    Ok(None)
}

/// The file at `path`; none when there is no file there (nothing, or a folder).
fn read_file(level: Level, path: &Path) -> Result<Option<ScriptFile>, std::io::Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(ScriptFile {
            level,
            origin: path.display().to_string(),
            text,
        })),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(e) if path.is_dir() => {
            tracing::debug!("skipping folder `{}`: {e}", path.display());
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn bundled_file(path: &str) -> Option<ScriptFile> {
    bundled::file(path).map(|f| ScriptFile {
        level: Level::Bundled,
        origin: format!("bundled:{}", f.path),
        text: f.text.to_string(),
    })
}

#[derive(Clone, Copy)]
enum ListMode {
    /// `<name>.md` files.
    Markdown,
    /// `<name>/SKILL.md` folders.
    Skills,
    /// `<name>.star` files.
    Compiled,
    /// `<name>/mekara.star` folders.
    SkillsCompiled,
}

/// Script names under `dir`; unreadable folders and invalid names are skipped.
/// How many folders one scripts folder's listing visits at most: far more than any real
/// scripts folder holds, and a bound on a pathological one.
const MAX_FOLDERS: usize = 10_000;

fn list_files(dir: &Path, mode: ListMode) -> Vec<ScriptName> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    // Folders are followed through links (a scripts folder may link to a shared one), each
    // real folder once: a link back to a folder above (a cloned repository can hold one)
    // would otherwise make the walk endless.
    let mut seen: HashSet<PathBuf> = dir.canonicalize().into_iter().collect();
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        let here = current.canonicalize().unwrap_or_else(|_| current.clone());
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                let real = path.canonicalize().unwrap_or_else(|_| path.clone());
                if here.starts_with(&real) || !seen.insert(real) {
                    tracing::warn!(
                        "skipping `{}`: a link to a folder that is listed already",
                        path.display()
                    );
                    continue;
                }
                if seen.len() > MAX_FOLDERS {
                    tracing::warn!(
                        "stopped listing `{}` after {MAX_FOLDERS} folders",
                        dir.display()
                    );
                    return found;
                }
                let marker = match mode {
                    ListMode::Skills => Some("SKILL.md"),
                    ListMode::SkillsCompiled => Some("mekara.star"),
                    ListMode::Markdown | ListMode::Compiled => None,
                };
                if marker.is_some_and(|m| path.join(m).is_file()) {
                    push_name(&mut found, dir, &path);
                }
                pending.push(path);
            } else {
                let extension = match mode {
                    ListMode::Markdown => Some("md"),
                    ListMode::Compiled => Some("star"),
                    ListMode::Skills | ListMode::SkillsCompiled => None,
                };
                if extension.is_some_and(|x| path.extension().is_some_and(|e| e == x)) {
                    push_name(&mut found, dir, &path.with_extension(""));
                }
            }
        }
    }
    found
}

fn push_name(found: &mut Vec<ScriptName>, base: &Path, path: &Path) {
    let Some(relative) = path.strip_prefix(base).ok().and_then(Path::to_str) else {
        return;
    };
    match ScriptName::parse(relative) {
        Ok(name) => found.push(name),
        Err(e) => tracing::debug!("skipping `{}`: {e}", path.display()),
    }
}
