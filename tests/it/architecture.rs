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

/// A path as a file names it: from `crate::` (`None`) or `n` levels up (`Some(n)`), and its
/// names.
type Named = (Option<usize>, Vec<String>);

/// A path of a use tree, with the name after its `as` if it has one.
type UsePath = (Vec<String>, Option<String>);

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
fn no_top_level_module_imports_one_that_imports_it() {
    let graph = Graph::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).top_level();
    let cycles = graph.cycles();
    assert!(
        cycles.is_empty(),
        "import cycles between the top-level modules of src/ (each line: the modules of one \
         cycle, and the arrows that close it); the lower module should own what both need, \
         and the upper one be given the rest:\n{}",
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
    let write = |path: &str, text: &str| write_file(src, path, text);
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

/// Re-exports are followed, a parent naming its own files points at them, a re-export
/// points at what it names only where the file uses the name, an inline module's `super`
/// stays in its file, test-only files and `pub(in …)` are left out, and the top-level
/// graph folds files into their top-level modules.
#[test]
fn the_reader_follows_reexports_and_sees_a_parent_use_its_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    let write = |path: &str, text: &str| write_file(src, path, text);
    write("lib.rs", "mod p;\nmod q;\nmod r;\n");
    // `p` re-exports `Thing` from its file `p/t` without using it, and uses `p/u` itself.
    write(
        "p/mod.rs",
        "mod t;\nmod u;\nmod v;\nmod w;\n#[cfg(test)]\nmod fixture;\npub(crate) use t::Thing;\n\
         pub(crate) use w::w;\n\
         pub(crate) use u::Other;\npub(crate) static ALL: [Other; 0] = [];\n",
    );
    write("p/t.rs", "pub(crate) struct Thing;\n");
    write(
        "p/u.rs",
        "use super::Thing;\npub(crate) struct Other;\nfn said() -> &'static str { \"`Thing`\" }\n",
    );
    write("p/fixture.rs", "use crate::q::Anything;\n");
    write("p/v.rs", "fn k() { crate::r::go() }\n");
    // `p` declares and re-exports `w` without using it: `p/w` may use `p`.
    write("p/w.rs", "pub(crate) fn w() { super::ALL.len(); }\n");
    // `q` reaches `p/t` through the re-export; its inline module's `super` is `q` itself.
    write(
        "q.rs",
        "use crate::p::Thing;\npub(in crate::p) fn f() {}\nmod imp {\n    use super::f;\n    \
         fn g() -> char { '{' }\n}\nfn h() { crate::r::go() }\n",
    );
    write("r.rs", "pub(crate) fn go() { crate::p::ALL.len(); }\n");
    let graph = Graph::read(src);
    let arrows: Vec<String> = graph
        .arrows()
        .map(|(from, to)| format!("{} -> {}", name(from), name(to)))
        .collect();
    assert_eq!(
        arrows,
        [
            "p -> p/u",
            "p/u -> p/t",
            "p/v -> r",
            "p/w -> p",
            "q -> p/t",
            "q -> r",
            "r -> p"
        ],
        "{arrows:?}"
    );
    assert!(graph.cycles().is_empty(), "{:?}", graph.cycles());
    assert_eq!(
        graph.top_level().cycles(),
        ["p, r: p -> r, r -> p"],
        "the top level folds `p/v -> r` into `p -> r`"
    );
}

/// Writes `text` to `path` under `src`, making its folders.
fn write_file(src: &Path, path: &str, text: &str) {
    let path = src.join(path);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// Files and the modules each one's code names.
struct Graph {
    arrows: BTreeMap<Module, BTreeSet<Module>>,
}

/// One file as the reader sees it: its code without its re-exports (`pub use`), and the
/// names it re-exports, each with the full path it stands for.
struct File {
    code: String,
    reexports: BTreeMap<String, Module>,
}

impl Graph {
    /// The files under `src` and their arrows. A path is followed through `pub use`
    /// re-exports to the file that defines what it names (`crate::agents::Client` is an arrow
    /// to `agents/clients`, where `agents/mod.rs` re-exports it from). A file naming its own
    /// child module (`clients::Client` in `agents/mod.rs`, in a `use` or inline) points at
    /// the child, so a child that imports back from its parent closes a cycle; a re-export
    /// points at what it names only when the file uses the name itself (a folder's
    /// `mod.rs` that only re-exports its files is their public face, not their user).
    fn read(src: &Path) -> Graph {
        let mut texts = BTreeMap::new();
        collect(src, src, &mut texts);
        assert!(!texts.is_empty(), "no Rust files under {}", src.display());
        let tests: Vec<Module> = texts
            .iter()
            .flat_map(|(module, code)| test_only(module, code))
            .collect();
        texts.retain(|module, _| !tests.iter().any(|t| module.starts_with(t)));
        let known: BTreeSet<Module> = texts.keys().cloned().collect();
        let files: BTreeMap<Module, File> = texts
            .into_iter()
            .map(|(module, code)| {
                let children = children_of(&module, &known);
                let (reexports, code) = reexports_of(&code, &children);
                let reexports = reexports
                    .into_iter()
                    .filter_map(|(name, (supers, path))| {
                        Some((name, absolute(&module, supers, path)?))
                    })
                    .collect();
                (module, File { code, reexports })
            })
            .collect();
        let arrows = files
            .iter()
            .map(|(module, file)| {
                let children = children_of(module, &known);
                // A name a file re-exports and uses itself is an arrow too.
                let used = file
                    .reexports
                    .iter()
                    .filter(|(name, _)| uses_word(&file.code, name))
                    .map(|(_, path)| path.clone());
                let targets = paths_named(&file.code, &children)
                    .into_iter()
                    .filter_map(|(supers, path)| absolute(module, supers, path))
                    .chain(used)
                    .map(|path| resolve(&files, path, 0))
                    .filter(|target| target != module && !target.is_empty())
                    .collect();
                (module.clone(), targets)
            })
            .collect();
        Graph { arrows }
    }

    /// The same graph one level up: an arrow between two top-level modules (`agents`,
    /// `display`) wherever a file of one points at a file of the other.
    fn top_level(&self) -> Graph {
        let mut arrows: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (from, to) in self.arrows() {
            let (Some(from), Some(to)) = (from.first(), to.first()) else {
                continue;
            };
            let entry = arrows.entry(vec![from.clone()]).or_default();
            if from != to {
                entry.insert(vec![to.clone()]);
            }
        }
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

/// The names of `module`'s child modules that are files of their own.
fn children_of(module: &Module, known: &BTreeSet<Module>) -> BTreeSet<String> {
    known
        .iter()
        .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
        .filter_map(|m| m.last().cloned())
        .collect()
}

/// The full path of a path named in `module` from `crate::` (`None`) or `n` levels up
/// (`Some(n)`; `Some(0)` is `self::` or a child's bare name); `None` above the crate root.
fn absolute(module: &Module, supers: Option<usize>, path: Vec<String>) -> Option<Module> {
    let mut full: Module = match supers {
        None => Vec::new(),
        Some(n) => module[..module.len().checked_sub(n)?].to_vec(),
    };
    full.extend(path);
    Some(full)
}

/// The file that defines what `path` names: the longest prefix of it that is a file, and
/// from there through that file's re-exports, if it re-exports the next name.
fn resolve(files: &BTreeMap<Module, File>, path: Module, depth: usize) -> Module {
    let Some(file) = (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| files.contains_key(m))
    else {
        return Vec::new();
    };
    let rest = &path[file.len()..];
    // A chain of re-exports longer than this is a re-export loop, which rustc refuses.
    if depth < 16
        && let Some(first) = rest.first()
        && let Some(to) = files[&file].reexports.get(first)
    {
        let next = [to.clone(), rest[1..].to_vec()].concat();
        let target = resolve(files, next, depth + 1);
        if !target.is_empty() {
            return target;
        }
    }
    file
}

/// What the `pub use` (and `pub(…) use`) statements of `code` re-export: the name each
/// binds and the path it stands for, as [`paths_named`] gives paths.
/// And `code` without those statements.
fn reexports_of(code: &str, children: &BTreeSet<String>) -> (BTreeMap<String, Named>, String) {
    let mut found = BTreeMap::new();
    let mut rest_of_code = String::new();
    let mut at = 0;
    while let Some(offset) = code[at..].find("pub") {
        let start = at + offset;
        at = start + "pub".len();
        if start > 0 && is_ident(code.as_bytes()[start - 1]) {
            continue;
        }
        let mut rest = &code[at..];
        if rest.trim_start().starts_with('(') {
            let Some(close) = rest.find(')') else { break };
            rest = &rest[close + 1..];
        }
        let Some(tree_text) = rest.trim_start().strip_prefix("use ") else {
            continue;
        };
        let statement = &tree_text[..tree_text.find(';').unwrap_or(tree_text.len())];
        for (supers, path, bound) in bound_paths(statement.trim_start(), children) {
            found.insert(bound, (supers, path));
        }
        let end = code.len() - tree_text.len() + statement.len();
        rest_of_code.push_str(&code[rest_of_code.len()..start]);
        rest_of_code.push_str(&" ".repeat(end - start));
        at = end;
    }
    rest_of_code.push_str(&code[rest_of_code.len()..]);
    (found, rest_of_code)
}

/// Whether `code` has `word` as a whole word, outside string literals (a reply's text that
/// says "`status`" does not use the function `status`).
fn uses_word(code: &str, word: &str) -> bool {
    let mut outside = String::with_capacity(code.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in code.chars() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => in_string = !in_string,
            _ => {}
        }
        outside.push(if in_string { ' ' } else { c });
    }
    let code = outside.as_str();
    code.match_indices(word).any(|(at, _)| {
        // `mod pending;` declares the file; it uses nothing of it.
        if code[..at].ends_with("mod ") {
            return false;
        }
        let before = at.checked_sub(1).map(|b| code.as_bytes()[b]);
        let after = code.as_bytes().get(at + word.len());
        !before.is_some_and(is_ident) && !after.is_some_and(|b| is_ident(*b))
    })
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

/// `text` without `//` comments, without a trailing `#[cfg(test)] mod tests` or any other
/// `#[cfg(test)]` module, and with `pub(in path)` read as `pub(crate)` (a visibility names
/// a module without using anything of it).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut code = text
        .lines()
        .map(|line| match line.find("//") {
            // `"postgres://…"`: a `//` after an odd number of quotes is inside a string.
            Some(at) if line[..at].matches('"').count() % 2 == 0 => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    while let Some(at) = code.find("pub(in ") {
        let close = code[at..].find(')').map_or(code.len(), |c| at + c + 1);
        code.replace_range(at..close, "pub(crate)");
    }
    // A `#[cfg(test)] mod name;` stays: [`test_only`] reads it.
    let mut from = 0;
    while let Some(offset) = code[from..].find("#[cfg(test)]\nmod ") {
        let at = from + offset;
        match code[at..].find(['{', ';']).map(|end| at + end) {
            Some(open) if code.as_bytes()[open] == b'{' => {
                let end = block_end(&code, open);
                code.replace_range(at..end, "");
            }
            Some(end) => from = end,
            None => break,
        }
    }
    code
}

/// The modules that `code` (of `module`) declares for tests only, `#[cfg(test)] mod name;`:
/// like unit-test modules, they may reach anywhere.
fn test_only(module: &Module, code: &str) -> Vec<Module> {
    code.match_indices("#[cfg(test)]\n")
        .filter_map(|(at, cfg)| {
            let rest = code[at + cfg.len()..].trim_start();
            let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
            let name = rest.strip_prefix("mod ")?.split(';').next()?.trim();
            (!name.is_empty() && name.bytes().all(is_ident))
                .then(|| [module.clone(), vec![name.to_string()]].concat())
        })
        .collect()
}

/// Where the block opened by the `{` at byte `open` of `code` ends (just after its `}`),
/// skipping braces inside string and character literals.
fn block_end(code: &str, open: usize) -> usize {
    let bytes = code.as_bytes();
    let mut depth = 0usize;
    let mut at = open;
    while at < bytes.len() {
        match bytes[at] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            b'r' if (at == 0 || !is_ident(bytes[at - 1]))
                && matches!(bytes.get(at + 1), Some(b'"' | b'#')) =>
            {
                // A raw string `r#"…"#`: ends at `"` and as many `#`.
                let hashes = bytes[at + 1..].iter().take_while(|b| **b == b'#').count();
                let body = at + 1 + hashes + 1;
                let close = format!("\"{}", "#".repeat(hashes));
                at = code
                    .get(body..)
                    .and_then(|rest| rest.find(&close))
                    .map_or(bytes.len(), |c| body + c + close.len());
                continue;
            }
            b'"' => {
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
            }
            // `'{'` and `'\''`; a lifetime (`'a`) has no closing quote right after.
            b'\'' if bytes.get(at + 2) == Some(&b'\'') => at += 2,
            b'\'' if bytes.get(at + 1) == Some(&b'\\') => {
                at += 2;
                while at < bytes.len() && bytes[at] != b'\'' {
                    at += 1;
                }
            }
            _ => {}
        }
        at += 1;
    }
    bytes.len()
}

/// The bodies of the modules written inline in `code` (`mod imp { … }`), as byte ranges.
fn inline_modules(code: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = code[at..].find("mod ") {
        at += offset + "mod ".len();
        if at > 4 && is_ident(bytes[at - 5]) {
            continue;
        }
        let name = code[at..].bytes().take_while(|b| is_ident(*b)).count();
        let after = at + name;
        let open = after + code[after..].len() - code[after..].trim_start().len();
        if name > 0 && bytes.get(open) == Some(&b'{') {
            found.push(open..block_end(code, open));
        }
    }
    found
}

/// The module paths `code` names, from `crate::` (`None`), from `super::` (`Some(n)` for
/// `n` supers) or from `self::` or the bare name of one of `children` (`Some(0)`), with
/// `{…}` groups expanded.
fn paths_named(code: &str, children: &BTreeSet<String>) -> Vec<(Option<usize>, Vec<String>)> {
    let inline = inline_modules(code);
    let mut found = Vec::new();
    let mut at = 0;
    while at < code.len() {
        // Inside `mod imp { … }`, `super::` is the file itself, and `self::` or a bare name
        // is the inline module's: neither leaves the file.
        let depth = inline.iter().filter(|body| body.contains(&at)).count();
        match base(code, at, children) {
            Some((supers, len)) => {
                let (paths, used) = tree(&code[at + len..]);
                let supers = match supers {
                    None => Some(None),
                    Some(n) if n > depth => Some(Some(n - depth)),
                    Some(_) if depth > 0 => None,
                    Some(n) => Some(Some(n)),
                };
                if let Some(supers) = supers {
                    found.extend(paths.into_iter().map(|(p, _)| (supers, p)));
                }
                at += len + used.max(1);
            }
            None => at += code[at..].chars().next().map_or(1, char::len_utf8),
        }
    }
    found
}

/// The paths a use tree at the start of `text` stands for, each with the name it binds
/// (its last name, or what follows `as`), when the tree starts at a base [`paths_named`]
/// knows; nothing for an external crate's path or a macro's name.
fn bound_paths(
    text: &str,
    children: &BTreeSet<String>,
) -> Vec<(Option<usize>, Vec<String>, String)> {
    let Some((supers, len)) = base(text, 0, children) else {
        return Vec::new();
    };
    tree(&text[len..])
        .0
        .into_iter()
        .filter_map(|(path, alias)| {
            let bound = alias.or_else(|| path.last().cloned())?;
            Some((supers, path, bound))
        })
        .collect()
}

/// Whether a path starts at byte `at` of `code` from a base it can be followed from, and if
/// so, the base (as [`paths_named`] gives it) and its length.
fn base(code: &str, at: usize, children: &BTreeSet<String>) -> Option<(Option<usize>, usize)> {
    let bytes = code.as_bytes();
    // `a::crate` or `x_super::` is not a path's start.
    if at > 0 && (is_ident(bytes[at - 1]) || bytes[at - 1] == b':') {
        return None;
    }
    let rest = &code[at..];
    if rest.starts_with("crate::") {
        return Some((None, "crate::".len()));
    }
    if rest.starts_with("super::") {
        let mut n = 0;
        let mut len = 0;
        while rest[len..].starts_with("super::") {
            n += 1;
            len += "super::".len();
        }
        return Some((Some(n), len));
    }
    if rest.starts_with("self::") {
        return Some((Some(0), "self::".len()));
    }
    let ident = &rest[..rest.bytes().take_while(|b| is_ident(*b)).count()];
    (children.contains(ident) && rest[ident.len()..].starts_with("::")).then_some((Some(0), 0))
}

/// The paths of a use tree at the start of `text` (`a::b`, `a::{b, c::d as e}`, `{self,
/// x}`), each with the name after its `as` if it has one, and how many bytes it took.
fn tree(text: &str) -> (Vec<UsePath>, usize) {
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
            let alias = text[at..]
                .trim_start()
                .strip_prefix("as ")
                .map(|after| {
                    after
                        .trim_start()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .filter(|alias| !alias.is_empty());
            return (vec![(prefix, alias)], at);
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
                paths.extend(
                    inner
                        .into_iter()
                        .map(|(p, alias)| ([prefix.clone(), p].concat(), alias)),
                );
                at += used;
                // ` as Name`, then `,`.
                let skip = text[at..].find([',', '}']).unwrap_or(text.len() - at);
                at += skip;
                if text[at..].starts_with(',') {
                    at += 1;
                }
            }
        }
        return (vec![(prefix, None)], at);
    }
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
