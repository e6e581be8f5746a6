//! `ScriptName`: a checked script name such as `test/random`.

use std::fmt;

/// A script name that is safe to join to a scripts folder: segments of letters, digits,
/// `-`, `_` and `.`, separated by `/` (`:` is accepted as a separator and shown).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ScriptName(String);

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid script name `{name}`: {reason}")]
pub(crate) struct NameError {
    /// The name as given.
    pub name: String,
    /// What is wrong with it, with a hint where there is one.
    pub reason: String,
}

const MAX_LEN: usize = 200;

impl ScriptName {
    /// Checks a name as a user or agent wrote it, reading `:` as `/`.
    pub(crate) fn parse(raw: &str) -> Result<ScriptName, NameError> {
        let refuse = |reason: &str| NameError {
            name: raw.to_string(),
            reason: reason.to_string(),
        };
        let normal = raw.trim().replace(':', "/");
        if normal.is_empty() {
            return Err(refuse("the name is empty"));
        }
        if normal.len() > MAX_LEN {
            return Err(refuse("the name is longer than 200 characters"));
        }
        if normal.starts_with('/') {
            return Err(refuse(
                "a name cannot start with `/` or `:`; write it without the leading slash",
            ));
        }
        if let Some(c) = normal
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
        {
            return Err(refuse(&format!(
                "`{}` is not allowed; use letters, digits, `-`, `_`, `.` and `/`",
                c.escape_default()
            )));
        }
        for segment in normal.split('/') {
            if segment.is_empty() {
                return Err(refuse(
                    "a name cannot have an empty part (`//` or a trailing `/`)",
                ));
            }
            if segment == "." || segment == ".." {
                return Err(refuse("`.` and `..` are not allowed in a name"));
            }
            if segment.starts_with('.') {
                return Err(refuse("a part of a name cannot start with `.`"));
            }
        }
        Ok(ScriptName(normal))
    }

    /// The name with `/` separators, as used for files: `test/random`.
    pub(crate) fn as_path(&self) -> &str {
        &self.0
    }

    /// The same name with `-` read as `_`, when that differs.
    pub(crate) fn underscored(&self) -> Option<ScriptName> {
        self.0
            .contains('-')
            .then(|| ScriptName(self.0.replace('-', "_")))
    }
}

/// Displays the name the way Claude Code writes it: `test:random`.
impl fmt::Display for ScriptName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&shown(&self.0))
    }
}

/// A script name (or text that holds script names, such as a step's label) as mekara shows
/// it, the way Claude Code writes it: each `/` as `:`, `test/random` as `test:random`.
pub(crate) fn shown(name: &str) -> String {
    name.replace('/', ":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_both_separators_and_displays_colons() {
        let a = ScriptName::parse("test/random").expect("valid");
        let b = ScriptName::parse("test:random").expect("valid");
        assert_eq!(a, b);
        assert_eq!(a.as_path(), "test/random");
        assert_eq!(a.to_string(), "test:random");
    }

    #[test]
    fn underscored_form() {
        let n = ScriptName::parse("a-b/c-d").expect("valid");
        assert_eq!(n.underscored().expect("differs").as_path(), "a_b/c_d");
        assert!(
            ScriptName::parse("plain")
                .expect("valid")
                .underscored()
                .is_none()
        );
    }

    #[test]
    fn refuses_path_tricks() {
        for bad in [
            "",
            "  ",
            "../etc/passwd",
            "a/../b",
            "/abs",
            ":abs",
            "a//b",
            "a/",
            "./a",
            ".hidden",
            "a/.git",
            "a\\b",
            "a b",
            "a\0b",
            "a/*",
            "~/x",
            "a\nb",
        ] {
            let err = ScriptName::parse(bad).expect_err(bad);
            assert_eq!(err.name, bad);
        }
        let long = "a".repeat(201);
        assert!(ScriptName::parse(&long).is_err());
    }

    #[test]
    fn error_messages_say_what_to_do() {
        let err = ScriptName::parse("/test/random").expect_err("leading slash");
        assert_eq!(
            err.to_string(),
            "invalid script name `/test/random`: a name cannot start with `/` or `:`; write it without the leading slash"
        );
        let err = ScriptName::parse("a/../b").expect_err("dotdot");
        assert_eq!(
            err.to_string(),
            "invalid script name `a/../b`: `.` and `..` are not allowed in a name"
        );
    }
}
