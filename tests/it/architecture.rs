//! The shape of `src/` (STYLE.md, "Shape"): no two files import each other, directly or
//! through others, and the engine, scripts and paths point at nothing above them (the
//! command line, the MCP server, the agent layer, the store backends). Read from the
//! sources: an arrow is a `crate::…` or `super::…` path in a file's code (in a `use` or
//! inline), to the file that defines the module it names. A `mod.rs` naming its own child
//! modules by their bare names is not an arrow: a folder owns its files. Unit-test modules
//! (`#[cfg(test)] mod tests` at the end of a file) are left out: they may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path from the crate root (`["engine", "journal"]`); the root is empty.
type Module = Vec<String>;

/// Modules the bottom layers may not point at: the adapters and the backends above them.
const ABOVE_THE_ENGINE: [&str; 9] = [
    "cli", "mcp", "agents", "agent", "store", "install", "hooks", "serve", "traces",
];

/// The bottom layers.
const BOTTOM: [&str; 3] = ["engine", "script", "paths"];

/// What the MCP server adapter (`mcp`) sits on, and must not be imported by: the agent
/// layer, the hooks and the installer serve every client, not only MCP's.
const BELOW_THE_MCP_SERVER: [&str; 3] = ["agents", "hooks", "install"];

#[test]
fn no_file_imports_a_file_that_imports_it() {
    let graph = Graph::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let cycles = graph.cycles();
    assert!(
        cycles.is_empty(),
        "import cycles between files of src/ (each line: the files of one cycle, and the arrows \
         that close it); break each by moving what both need into the lower one or a new file:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_engine_scripts_and_paths_point_at_nothing_above_them() {
    let graph = Graph::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let mut upward = Vec::new();
    for (from, to) in graph.arrows() {
        let low = from.first().is_some_and(|m| BOTTOM.contains(&m.as_str()));
        let high = to
            .first()
            .is_some_and(|m| ABOVE_THE_ENGINE.contains(&m.as_str()));
        if low && high {
            upward.push(format!("{} -> {}", name(from), name(to)));
        }
    }
    assert!(
        upward.is_empty(),
        "arrows from the bottom layers (engine, script, paths) up to an adapter or a store \
         backend; the lower layer should own the interface and the upper one implement it:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_engine_names_no_store_backend() {
    let mut files = BTreeMap::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    collect(&src, &src.join("engine"), &mut files);
    let naming: Vec<String> = files
        .iter()
        .filter(|(_, code)| code.contains("postgres") || code.contains("FileStore"))
        .map(|(module, _)| name(module))
        .collect();
    assert!(
        naming.is_empty(),
        "files of src/engine/ that name a store backend (they belong in src/store/, behind \
         `engine::store::Store`): {naming:?}"
    );
}

#[test]
fn the_agent_layer_hooks_and_installer_do_not_import_the_mcp_server() {
    let graph = Graph::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let upward: Vec<String> = graph
        .arrows()
        .filter(|(from, to)| {
            from.first()
                .is_some_and(|m| BELOW_THE_MCP_SERVER.contains(&m.as_str()))
                && to.first().is_some_and(|m| m == "mcp")
        })
        .map(|(from, to)| format!("{} -> {}", name(from), name(to)))
        .collect();
    assert!(
        upward.is_empty(),
        "the agent layer, the hooks and the installer import the MCP server adapter; what they \
         need belongs in `agents/`:\n{}",
        upward.join("\n")
    );
}

/// The reading itself is tested on a small made-up tree, so that a graph that finds no
/// arrows at all cannot pass the two tests above by accident.
#[test]
fn the_reader_finds_use_inline_super_and_grouped_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\n");
    write(
        "a/mod.rs",
        "//! crate::c::Never — a comment is not an arrow\nmod x;\nuse crate::b::{self, Thing as T};\n",
    );
    write("a/x.rs", "fn f() { super::super::c::go(); }\n");
    write(
        "b.rs",
        "pub(crate) fn g() { crate::a::x::f() }\n#[cfg(test)]\nmod tests {\n    use crate::c::Z;\n}\n",
    );
    write("c.rs", "use crate::{a::{self}, b};\n");
    let graph = Graph::read(src);
    let arrows: Vec<String> = graph
        .arrows()
        .map(|(from, to)| format!("{} -> {}", name(from), name(to)))
        .collect();
    assert_eq!(
        arrows,
        ["a -> b", "a/x -> c", "b -> a/x", "c -> a", "c -> b"],
        "{arrows:?}"
    );
    assert_eq!(
        graph.cycles(),
        ["a, a/x, b, c: a -> b, a/x -> c, b -> a/x, c -> a, c -> b"]
    );
}

/// Files and the modules each one's code names.
struct Graph {
    arrows: BTreeMap<Module, BTreeSet<Module>>,
}

impl Graph {
    fn read(src: &Path) -> Graph {
        let mut files = BTreeMap::new();
        collect(src, src, &mut files);
        assert!(!files.is_empty(), "no Rust files under {}", src.display());
        let known: BTreeSet<Module> = files.keys().cloned().collect();
        let arrows = files
            .iter()
            .map(|(module, text)| {
                let targets = paths_named(text)
                    .into_iter()
                    .filter_map(|(supers, path)| {
                        let mut full: Module = match supers {
                            None => Vec::new(),
                            Some(n) => module[..module.len().checked_sub(n)?].to_vec(),
                        };
                        full.extend(path);
                        let target = (0..=full.len())
                            .rev()
                            .map(|n| full[..n].to_vec())
                            .find(|m| known.contains(m))?;
                        (target != *module && !target.is_empty()).then_some(target)
                    })
                    .collect();
                (module.clone(), targets)
            })
            .collect();
        Graph { arrows }
    }

    fn arrows(&self) -> impl Iterator<Item = (&Module, &Module)> {
        self.arrows
            .iter()
            .flat_map(|(from, to)| to.iter().map(move |t| (from, t)))
    }

    /// Each group of files that reach one another (a strongly connected component of more
    /// than one file), as `files: arrows between them`.
    fn cycles(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut seen = BTreeSet::new();
        for start in self.arrows.keys() {
            if seen.contains(start) {
                continue;
            }
            let forward = self.reach(start, false);
            let backward = self.reach(start, true);
            let group: BTreeSet<&Module> = forward.intersection(&backward).copied().collect();
            seen.extend(group.iter().map(|m| (*m).clone()));
            if group.len() > 1 {
                let inside: Vec<String> = self
                    .arrows()
                    .filter(|(f, t)| group.contains(f) && group.contains(t))
                    .map(|(f, t)| format!("{} -> {}", name(f), name(t)))
                    .collect();
                let files: Vec<String> = group.iter().map(|m| name(m)).collect();
                found.push(format!("{}: {}", files.join(", "), inside.join(", ")));
            }
        }
        found
    }

    /// The modules reachable from `start` (following arrows backwards when `reverse`).
    fn reach<'a>(&'a self, start: &'a Module, reverse: bool) -> BTreeSet<&'a Module> {
        let mut reached = BTreeSet::from([start]);
        let mut todo = vec![start];
        while let Some(at) = todo.pop() {
            let next: Vec<&Module> = if reverse {
                self.arrows()
                    .filter(|(_, t)| *t == at)
                    .map(|(f, _)| f)
                    .collect()
            } else {
                self.arrows.get(at).into_iter().flatten().collect()
            };
            for n in next {
                if reached.insert(n) {
                    todo.push(n);
                }
            }
        }
        reached
    }
}

/// `engine/journal` for people.
fn name(module: &Module) -> String {
    if module.is_empty() {
        "lib".into()
    } else {
        module.join("/")
    }
}

/// Every `.rs` file under `dir`, by module, with its code (comments and trailing unit-test
/// module removed).
fn collect(root: &Path, dir: &Path, files: &mut BTreeMap<Module, String>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            collect(root, &path, files);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path
            .strip_prefix(root)
            .expect("under src")
            .with_extension("");
        let mut module: Module = relative
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        let text = std::fs::read_to_string(&path).expect("read file");
        files.insert(module, code_of(&text));
    }
}

/// `text` without `//` comments and without a trailing `#[cfg(test)] mod tests`.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            // `"postgres://…"`: a `//` after an odd number of quotes is inside a string.
            Some(at) if line[..at].matches('"').count() % 2 == 0 => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths `code` names from `crate::` (`None`) or from `super::` (`Some(n)` for
/// `n` supers), with `{…}` groups expanded.
fn paths_named(code: &str) -> Vec<(Option<usize>, Vec<String>)> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let starts_word = at == 0 || !is_ident(bytes[at - 1]);
        let base = if !starts_word {
            None
        } else if rest.starts_with("crate::") {
            Some((None, "crate::".len()))
        } else if rest.starts_with("super::") {
            let mut n = 0;
            let mut len = 0;
            while code[at + len..].starts_with("super::") {
                n += 1;
                len += "super::".len();
            }
            Some((Some(n), len))
        } else {
            None
        };
        match base {
            Some((supers, len)) => {
                let (paths, used) = tree(&code[at + len..]);
                found.extend(paths.into_iter().map(|p| (supers, p)));
                at += len + used.max(1);
            }
            None => at += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    found
}

/// The paths of a use tree at the start of `text` (`a::b`, `a::{b, c::d}`, `{self, x}`) and
/// how many bytes it took.
fn tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    let mut at = 0;
    loop {
        let ident: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !ident.is_empty() {
            at += ident.len();
            if ident != "self" {
                prefix.push(ident);
            }
            if text[at..].starts_with("::") {
                at += 2;
                continue;
            }
            return (vec![prefix], at);
        }
        if text[at..].starts_with('{') {
            at += 1;
            let mut paths = Vec::new();
            loop {
                at += text[at..].len() - text[at..].trim_start().len();
                if text[at..].starts_with('}') || at >= text.len() {
                    return (paths, at + 1);
                }
                let (inner, used) = tree(&text[at..]);
                paths.extend(inner.into_iter().map(|p| [prefix.clone(), p].concat()));
                at += used;
                // ` as Name`, then `,`.
                let skip = text[at..].find([',', '}']).unwrap_or(text.len() - at);
                at += skip;
                if text[at..].starts_with(',') {
                    at += 1;
                }
            }
        }
        return (vec![prefix], at);
    }
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
