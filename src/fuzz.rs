//! Fuzz targets of the parsers that read what mekara did not write itself: the journal
//! reader, the hook's input and the prompt tags. They are property tests (proptest), kept
//! inside the crate so they reach the `pub(crate)` parsers, and run with every `cargo test`.
//!
//! The generators reach the edges of what a run carries: integers past ±2^64 and ±2^128,
//! round and not; values nested as deep as a script may give; long strings; and odd
//! Unicode (combining marks, right-to-left text and overrides, the astral plane, control
//! characters other than NUL).
//!
//! Bounded: each target tries `PROPTEST_CASES` inputs (2,000 by default in a release build
//! as CI runs them, 200 in a debug build). Failures are not written to files: a case
//! a target finds becomes a named regression test beside the parser it broke.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value as Json};

use crate::engine::journal::{
    self, Event, FailEvent, JournalError, Origin, Outcome, PopEvent, PushEvent, RunEvent, StepEvent,
};
use crate::engine::step::{StepInput, StepRecord, StepResult};
use crate::engine::tool::{self, Piece};
use crate::hooks::{self, Hook, HookInputError};

/// `cases` inputs per target in a release build (CI runs its tests so), a tenth of that in
/// a debug build (the edit-test loop), unless `PROPTEST_CASES` says otherwise.
fn config(cases: u32) -> Config {
    let default = if cfg!(debug_assertions) {
        cases / 10
    } else {
        cases
    };
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(default),
        failure_persistence: None,
        ..Config::default()
    }
}

/// Text that is mostly ordinary but often holds what parsers trip on: brackets, quotes,
/// backslashes, newlines, multi-byte characters, and pieces of the syntax they read.
fn tricky_text() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        "[a-z /:_-]{0,6}",
        Just("[use-mcp:".to_string()),
        Just("]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("\n".to_string()),
        Just("é€😀".to_string()),
        odd_unicode(),
        Just(r#"{"a": "]"}"#.to_string()),
        Just("s/t".to_string()),
        Just(":".to_string()),
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(atom, 0..24).prop_map(|parts| parts.concat())
}

/// Characters that text handling trips on: combining marks (alone and stacked), right-to-left
/// letters, marks and overrides, joiners, the byte-order mark, line and paragraph
/// separators, the astral plane up to its last code point, and control characters (all but
/// NUL, which no text of a run holds).
fn odd_unicode() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("e\u{301}\u{338}\u{20dd}".to_string()),
        Just("\u{301}".to_string()),
        Just("שלום عربي".to_string()),
        Just("\u{202e}gnp.exe\u{202c}\u{200f}\u{200e}".to_string()),
        Just("👩\u{200d}👩\u{200d}👧\u{fe0f}\u{feff}".to_string()),
        Just("\u{2028}\u{2029}\u{85}".to_string()),
        Just("𝔘𝔫𝔦\u{10ffff}\u{e0001}".to_string()),
        (1u8..0x20).prop_map(|c| char::from(c).to_string()),
        Just("\u{7f}\u{9b}".to_string()),
    ]
}

/// How deep a value a script gives or takes may be nested: the engine's `MAX_DEPTH`.
const DEEPEST: usize = 100;

/// A whole number as JSON, of any size: near the edges of 64 and 128 bits (2^63, 2^64,
/// 2^128, one either side), round ones (`10^k`, which a float prints as the same digits),
/// and long ones, of either sign.
fn big_integer() -> impl Strategy<Value = Json> {
    let digits = prop_oneof![
        Just("9223372036854775808".to_string()),
        Just("18446744073709551615".to_string()),
        Just("18446744073709551616".to_string()),
        Just("18446744073709551617".to_string()),
        Just("340282366920938463463374607431768211455".to_string()),
        Just("340282366920938463463374607431768211456".to_string()),
        Just("340282366920938463463374607431768211457".to_string()),
        (0usize..120).prop_map(|zeros| format!("1{}", "0".repeat(zeros))),
        ("[1-9]", "[0-9]{0,90}", 0usize..40)
            .prop_map(|(first, rest, zeros)| format!("{first}{rest}{}", "0".repeat(zeros))),
    ];
    (any::<bool>(), digits).prop_map(|(negative, digits)| {
        let text = if negative {
            format!("-{digits}")
        } else {
            digits
        };
        // Digits with an optional sign are a JSON number.
        serde_json::from_str(&text).expect("a whole number is JSON")
    })
}

/// A JSON value of strings (odd and long ones too), numbers of any size, lists and objects,
/// now and then nested as deep as a script may give ([`DEEPEST`]).
fn json_value() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        (-1000i64..1000).prop_map(Json::from),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        big_integer(),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(Json::from),
        tricky_text().prop_map(Json::String),
        (tricky_text(), 50usize..400).prop_map(|(text, n)| Json::String(text.repeat(n))),
    ];
    let nested = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
            prop::collection::btree_map("[a-z]{1,5}", inner, 0..4)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    });
    prop_oneof![
        9 => nested.clone(),
        1 => (nested, 1..=DEEPEST, any::<bool>()).prop_map(
            |(mut value, depth, in_lists)| {
                for _ in 1..depth {
                    value = if in_lists {
                        Json::Array(vec![value])
                    } else {
                        Json::Object(Map::from_iter([("a".to_string(), value)]))
                    };
                }
                value
            }
        ),
    ]
}

fn json_object() -> impl Strategy<Value = Map<String, Json>> {
    prop::collection::btree_map("[a-z_]{1,6}", json_value(), 0..4)
        .prop_map(|m| m.into_iter().collect())
}

/// A well-formed journal: the header, then events that fit the stack.
fn journal_events() -> impl Strategy<Value = Vec<Event>> {
    let step = (
        tricky_text(),
        tricky_text(),
        any::<bool>(),
        any::<bool>(),
        json_object(),
        json_value(),
    );
    prop::collection::vec((0u8..5, step), 0..12).prop_map(|moves| {
        let mut events = vec![Event::Run(RunEvent {
            format: journal::FORMAT.to_string(),
            mekara: "0.0.0".into(),
            id: "r".into(),
            token_sha256: Some("0".repeat(64)),
            at: 1,
        })];
        let mut depth = 0usize;
        let mut steps = 0usize;
        for (kind, (text, output, success, allow_failure, kwargs, value)) in moves {
            match kind {
                0 => {
                    events.push(Event::Push(PushEvent {
                        depth,
                        script: text.clone(),
                        compiled: success,
                        request: output.clone(),
                        working_dir: "/w".into(),
                        origin: if depth == 0 {
                            Origin::Start
                        } else {
                            Origin::Call
                        },
                        called_as: (depth > 0).then_some(text),
                        allow_failure: depth > 0 && allow_failure,
                        at: 2,
                    }));
                    depth += 1;
                }
                1 if depth > 0 => {
                    events.push(Event::Step(StepEvent {
                        depth: depth - 1,
                        record: StepRecord {
                            index: steps,
                            input: StepInput::Shell {
                                command: text,
                                working_dir: "/w".into(),
                                env: std::collections::BTreeMap::new(),
                                shell: None,
                            },
                            context: (!output.is_empty()).then(|| output.clone()),
                            result: StepResult {
                                success,
                                output,
                                ..StepResult::default()
                            },
                            allow_failure,
                            parallel: None,
                        },
                        at: 3,
                    }));
                    steps += 1;
                }
                4 if depth > 0 => {
                    events.push(Event::Step(StepEvent {
                        depth: depth - 1,
                        record: StepRecord {
                            index: steps,
                            input: StepInput::Function {
                                function: text,
                                kwargs,
                            },
                            context: None,
                            result: StepResult {
                                success,
                                output,
                                // A `null` value reads back as none: the same to a script.
                                value: (!value.is_null()).then_some(value),
                                ..StepResult::default()
                            },
                            allow_failure,
                            parallel: None,
                        },
                        at: 3,
                    }));
                    steps += 1;
                }
                2 if depth > 0 => events.push(Event::Fail(FailEvent {
                    depth: depth - 1,
                    error: text,
                    at: 4,
                })),
                3 if depth > 0 => {
                    depth -= 1;
                    events.push(Event::Pop(PopEvent {
                        depth,
                        outcome: if success {
                            Outcome::Completed
                        } else {
                            Outcome::Failed
                        },
                        error: (!success).then_some(output),
                        agent: None,
                        at: 5,
                    }));
                }
                _ => {}
            }
        }
        events
    })
}

fn journal_bytes(events: &[Event]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for event in events {
        bytes.extend(serde_json::to_vec(event).expect("an event serializes"));
        bytes.push(b'\n');
    }
    bytes
}

proptest! {
    #![proptest_config(config(2000))]

    /// Any bytes: the reader answers (events, a torn tail, or an error with a real line),
    /// and never panics.
    #[test]
    fn the_journal_reader_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Err(JournalError::Corrupt { line, .. }) = journal::parse(Path::new("j"), &bytes) {
            prop_assert!(line >= 1);
        }
    }

    /// A journal mekara could write reads back as the same events, and replays.
    #[test]
    fn a_written_journal_reads_back_the_same(events in journal_events()) {
        let contents = journal::parse(Path::new("j"), &journal_bytes(&events))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(contents.torn.is_none());
        prop_assert_eq!(&contents.events, &events);
        let replayed = crate::engine::runs::RunHistory::replay(Path::new("j"), &contents.events);
        prop_assert!(replayed.is_ok(), "{:?}", replayed.err());
    }

    /// Damage to a line before the last is reported at that line (1-based); damage to the
    /// last is a torn tail.
    #[test]
    fn damage_is_reported_at_its_line(
        events in journal_events(),
        at in any::<prop::sample::Index>(),
        garbage in "[^\n]{0,12}",
    ) {
        let text = String::from_utf8(journal_bytes(&events)).expect("utf-8");
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let at = at.index(lines.len());
        lines[at] = format!("{{{garbage}");
        let mut damaged = lines.join("\n");
        damaged.push('\n');
        match journal::parse(Path::new("j"), damaged.as_bytes()) {
            Err(JournalError::Corrupt { line, .. }) => prop_assert_eq!(line, at + 1),
            Ok(contents) => {
                prop_assert_eq!(at + 1, lines.len(), "only the last line may be torn");
                prop_assert!(contents.torn.is_some());
            }
            Err(other) => prop_assert!(false, "{}", other),
        }
    }

    /// The prompt-tag parser never panics, and its pieces are the text again, in order.
    #[test]
    fn the_tag_parser_keeps_every_byte(text in tricky_text()) {
        let joined: String = tool::parse(&text)
            .iter()
            .map(|piece| match piece {
                Piece::Text(t) | Piece::Tag { text: t, .. } | Piece::Malformed { text: t, .. } => *t,
            })
            .collect();
        prop_assert_eq!(joined, text);
    }

    /// A tag written from a server, a tool and arguments reads back as them.
    #[test]
    fn a_written_tag_reads_back(
        server in "[a-z0-9_-]{1,8}",
        tool_name in "[a-z0-9_-]{1,8}",
        arguments in json_object(),
        before in "[^\\[]{0,8}",
        after in "[^\\[]{0,8}",
    ) {
        let tag = if arguments.is_empty() {
            format!("[use-mcp:{server}/{tool_name}]")
        } else {
            format!("[use-mcp:{server}/{tool_name}:{}]", Json::Object(arguments.clone()))
        };
        let text = format!("{before}{tag}{after}");
        let tags: Vec<_> = tool::parse(&text)
            .into_iter()
            .filter_map(|piece| match piece {
                Piece::Tag { text, server, tool, arguments } => Some((text, server, tool, arguments)),
                _ => None,
            })
            .collect();
        prop_assert_eq!(tags, vec![(tag.as_str(), server, tool_name, arguments)]);
    }

    /// Any text as a hook's stdin: an answer or an input error, never a panic; text that
    /// is not JSON is refused saying where it stopped being JSON.
    #[test]
    fn the_hook_input_never_panics(stdin in tricky_text(), which in any::<bool>()) {
        let hook = if which { Hook::RerouteUserCommands } else { Hook::RerouteAgentCommands };
        let nowhere = Path::new("/nonexistent-mekara-fuzz");
        if let Err(HookInputError::NotJson(e)) = hooks::run(hook, &stdin, nowhere, hooks::Registered { start: "start", plugin: None }) {
            prop_assert!(e.line() >= 1, "{}", e);
        }
    }

    /// Hook JSON of any shape, with prompts and skills of any text, registered by `mekara
    /// install` or by the plugin (whose names the text may start with): never a panic.
    #[test]
    fn hook_json_of_any_shape_never_panics(
        prompt in tricky_text(),
        extra in json_value(),
        which in any::<bool>(),
        plugin in any::<bool>(),
    ) {
        let nowhere = Path::new("/nonexistent-mekara-fuzz");
        let by = hooks::Registered {
            start: "start",
            plugin: plugin.then_some(hooks::PluginNames { name: "mekara", tools: "mcp__plugin_mekara_mekara__" }),
        };
        for input in [
            serde_json::json!({"prompt": format!("/{prompt}"), "cwd": prompt}),
            serde_json::json!({"prompt": format!("/mekara:{prompt}")}),
            serde_json::json!({"tool_name": "Skill", "tool_input": {"skill": prompt, "args": extra}}),
            serde_json::json!({"tool_name": format!("mcp__plugin_mekara_mekara__{prompt}"), "tool_input": extra}),
            serde_json::json!({"prompt": extra.clone(), "tool_name": extra.clone(), "tool_input": extra}),
        ] {
            let hook = if which { Hook::RerouteUserCommands } else { Hook::RerouteAgentCommands };
            let _ = hooks::run(hook, &input.to_string(), nowhere, by);
        }
    }

    /// `/name args` splits back into the name and the trimmed arguments.
    #[test]
    fn a_command_splits_back(name in "[a-z0-9:/_-]{1,12}", args in tricky_text()) {
        let name = name.trim_start_matches('/');
        prop_assume!(!name.is_empty());
        let prompt = format!("/{name} {args}");
        prop_assert_eq!(hooks::user_command(&prompt), Some((name, args.trim())));
    }
}
