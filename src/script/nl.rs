//! The text of an NL script: optional front matter, a Markdown body, and `$ARGUMENTS`.

/// The placeholder that a script's arguments replace.
pub(crate) const ARGUMENTS: &str = "$ARGUMENTS";

/// The front-matter key that marks a command file `mekara install` generated for a bundled
/// script (its value is the script's name). Such a file is Claude Code's way to `/name`, not
/// a script of its folder's level: the resolver reads past it to the bundled script.
pub(crate) const GENERATED_KEY: &str = "mekara-bundled";

/// Whether `text` is a command file `mekara install` generated for a bundled script.
pub(crate) fn is_generated(text: &str) -> bool {
    NlText::parse(text)
        .front_matter
        .iter()
        .any(|(k, _)| *k == GENERATED_KEY)
}

/// An NL script split into its front matter (`---` fenced `key: value` lines, as Claude
/// Code commands and Agent Skills write them) and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NlText<'a> {
    /// `key: value` pairs of the front matter, in order; values have quotes removed.
    pub front_matter: Vec<(&'a str, &'a str)>,
    /// The Markdown after the front matter.
    pub body: &'a str,
}

impl<'a> NlText<'a> {
    /// Splits `text`; text without a complete front matter block is all body.
    pub(crate) fn parse(text: &'a str) -> NlText<'a> {
        let whole = NlText {
            front_matter: Vec::new(),
            body: text,
        };
        let Some(rest) = text
            .strip_prefix("---\n")
            .or_else(|| text.strip_prefix("---\r\n"))
        else {
            return whole;
        };
        let mut front_matter = Vec::new();
        let mut offset = 0;
        for line in rest.split_inclusive('\n') {
            offset += line.len();
            let trimmed = line.trim_end();
            if trimmed == "---" {
                return NlText {
                    front_matter,
                    body: rest[offset..].trim_start_matches(['\r', '\n']),
                };
            }
            if let Some((key, value)) = trimmed.split_once(':') {
                let value = value.trim();
                let value = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(value);
                front_matter.push((key.trim(), value));
            }
        }
        whole
    }

    /// The `description` of the front matter, else the first line of text in the body
    /// (headings lose their `#`).
    pub(crate) fn description(&self) -> String {
        if let Some((_, d)) = self.front_matter.iter().find(|(k, _)| *k == "description") {
            return (*d).to_string();
        }
        self.body
            .lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string()
    }

    /// The body with every `$ARGUMENTS` replaced by `arguments`, as Claude Code expands a
    /// command. A script without the placeholder gets the arguments appended on a line of
    /// their own, as Claude Code does, so they are never lost.
    pub(crate) fn instructions(&self, arguments: &str) -> String {
        let (template, tail) = self.template(arguments);
        let mut text = template.replace(ARGUMENTS, arguments);
        text.push_str(&tail);
        text
    }

    /// The author's part of the instructions (with `$ARGUMENTS` still in it), and what
    /// follows it: the arguments on a line of their own when the body has no placeholder.
    /// Kept apart so that prompt tags are read from the author's text alone.
    pub(crate) fn template(&self, arguments: &str) -> (&'a str, String) {
        if self.body.contains(ARGUMENTS) || arguments.trim().is_empty() {
            (self.body, String::new())
        } else {
            (
                self.body.trim_end(),
                format!("\n\nARGUMENTS: {arguments}\n"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_and_description() {
        let t =
            NlText::parse("---\ndescription: \"Guess a number\"\nname: x\n---\n\n# Title\nBody\n");
        assert_eq!(
            t.front_matter,
            vec![("description", "Guess a number"), ("name", "x")]
        );
        assert_eq!(t.body, "# Title\nBody\n");
        assert_eq!(t.description(), "Guess a number");
    }

    #[test]
    fn description_falls_back_to_first_line() {
        assert_eq!(
            NlText::parse("\n\n## Do a thing\n\nmore").description(),
            "Do a thing"
        );
        assert_eq!(NlText::parse("").description(), "");
    }

    #[test]
    fn unterminated_front_matter_is_body() {
        let t = NlText::parse("---\nnot: closed\n");
        assert!(t.front_matter.is_empty());
        assert_eq!(t.body, "---\nnot: closed\n");
    }

    #[test]
    fn every_placeholder_is_replaced() {
        let t = NlText::parse("Use $ARGUMENTS then $ARGUMENTS.");
        assert_eq!(t.instructions("x"), "Use x then x.");
        // Arguments that hold the placeholder are not expanded again.
        assert_eq!(
            t.instructions("$ARGUMENTS"),
            "Use $ARGUMENTS then $ARGUMENTS."
        );
    }

    #[test]
    fn arguments_without_placeholder_are_appended() {
        let t = NlText::parse("Do it.\n");
        assert_eq!(t.instructions("now"), "Do it.\n\nARGUMENTS: now\n");
        assert_eq!(t.instructions(""), "Do it.\n");
    }
}
