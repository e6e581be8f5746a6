//! The types the step builtins declare to the typechecker: of their parameters
//! ([`Declared`]), so that `mekara check` finds a call such as `auto(42)` or
//! `llm("x", expects = 5)` before the script runs, and of their results ([`RESULTS`]), so
//! that it finds `r.output + 1`, `r.ouput` or a result passed where an `int` is expected.
//!
//! Declaring is all they do: at run time a [`Declared`] parameter takes any value, and the
//! builtin checks it itself, with words that name the parameter and what it takes; a result
//! is a plain `struct`, whatever type its builtin declares.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::OnceLock;

use starlark::typing::{Ty, TyStarlarkValue, TyUser, TyUserFields, TyUserParams};
use starlark::values::record::Record;
use starlark::values::type_repr::StarlarkTypeRepr;
use starlark::values::typing::{StarlarkCallable, TypeInstanceId};
use starlark::values::{UnpackValue, Value, ValueOfUnchecked};

/// A parameter of a step builtin, declared to the typechecker as `T` and taken as any value
/// at run time.
pub(super) struct Declared<'v, T> {
    pub(super) value: Value<'v>,
    declared: PhantomData<T>,
}

impl<T: StarlarkTypeRepr> StarlarkTypeRepr for Declared<'_, T> {
    type Canonical = T::Canonical;

    fn starlark_type_repr() -> Ty {
        T::starlark_type_repr()
    }
}

impl<'v, T: StarlarkTypeRepr> UnpackValue<'v> for Declared<'v, T> {
    type Error = std::convert::Infallible;

    fn unpack_value_impl(value: Value<'v>) -> Result<Option<Self>, Self::Error> {
        Ok(Some(Declared {
            value,
            declared: PhantomData,
        }))
    }
}

/// Defines a type by its [`Ty`].
macro_rules! declared_type {
    ($(#[$doc:meta])* $name:ident => $ty:expr) => {
        $(#[$doc])*
        pub(super) struct $name;

        impl StarlarkTypeRepr for $name {
            type Canonical = Self;

            fn starlark_type_repr() -> Ty {
                $ty
            }
        }
    };
}

declared_type!(
    /// `auto`'s step: a shell command or a function of the script.
    StepType => Ty::union2(Ty::string(), <StarlarkCallable<'static> as StarlarkTypeRepr>::starlark_type_repr())
);
declared_type!(
    /// Keyword arguments of a function step, arguments of an mcp step, `env`.
    DictOrNone => Ty::union2(Ty::dict(Ty::string(), Ty::any()), Ty::none())
);
declared_type!(
    /// A `timeout`: seconds.
    Seconds => Ty::unions(vec![Ty::int(), Ty::float(), Ty::none()])
);
declared_type!(
    /// `llm`'s `expects`: a dict of output name to description, or a list of names.
    Expects => Ty::unions(vec![
        Ty::dict(Ty::string(), Ty::any()),
        Ty::list(Ty::string()),
        Ty::none(),
    ])
);

/// What a step builtin's result holds, as the typechecker sees it: a record type named
/// `name` with these fields and no others. At run time the result is a `struct` with the
/// same fields (`auto` leaves out the one its other form has).
#[derive(Debug)]
pub(crate) struct ResultRecord {
    /// The builtin that returns it.
    pub(crate) builtin: &'static str,
    /// The type's name in the typechecker's messages.
    pub(crate) name: &'static str,
    /// Each field and its type.
    pub(crate) fields: &'static [Field],
}

/// A field of a step's result: its name, and its type.
pub(crate) type Field = (&'static str, fn() -> Ty);

fn str_or_none() -> Ty {
    Ty::union2(Ty::string(), Ty::none())
}

fn int_or_none() -> Ty {
    Ty::union2(Ty::int(), Ty::none())
}

fn json_dict() -> Ty {
    Ty::dict(Ty::string(), Ty::any())
}

/// The results of the step builtins, one record each. `auto`'s is one record for both its
/// forms, as one builtin declares one type: `.exit_code` is a command's, `.value` a
/// function's (`step_results` tells which form a call is where the source shows it).
pub(crate) const RESULTS: [ResultRecord; 5] = [
    ResultRecord {
        builtin: "auto",
        name: "auto_result",
        fields: &[
            ("success", Ty::bool),
            ("exit_code", int_or_none),
            ("value", Ty::any),
            ("output", Ty::string),
            ("error", str_or_none),
        ],
    },
    ResultRecord {
        builtin: "llm",
        name: "llm_result",
        fields: &[("success", Ty::bool), ("outputs", json_dict)],
    },
    ResultRecord {
        builtin: "ask",
        name: "ask_result",
        fields: &[
            ("success", Ty::bool),
            ("answer", str_or_none),
            ("error", str_or_none),
        ],
    },
    ResultRecord {
        builtin: "call_script",
        name: "call_script_result",
        fields: &[("success", Ty::bool), ("error", str_or_none)],
    },
    ResultRecord {
        builtin: "mcp",
        name: "mcp_result",
        fields: &[
            ("success", Ty::bool),
            ("content", Ty::string),
            ("structured", Ty::any),
            ("is_error", Ty::bool),
            ("error", str_or_none),
        ],
    },
];

impl ResultRecord {
    /// The result of `builtin`, when it is a step builtin.
    pub(crate) fn of(builtin: &str) -> Option<&'static ResultRecord> {
        RESULTS.iter().find(|r| r.builtin == builtin)
    }

    /// The record named `name` in the typechecker's messages.
    pub(crate) fn named(name: &str) -> Option<&'static ResultRecord> {
        RESULTS.iter().find(|r| r.name == name)
    }

    /// The type of its field `name`.
    pub(crate) fn field_type(&self, name: &str) -> Option<Ty> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, ty)| ty())
    }

    /// The names of its fields.
    pub(crate) fn field_names(&self) -> impl Iterator<Item = &'static str> + Clone + use<> {
        self.fields.iter().map(|(name, _)| *name)
    }

    /// Its type. Built once: a user type is told apart from another by its id.
    fn ty(&self) -> Ty {
        static TYPES: OnceLock<HashMap<&'static str, Ty>> = OnceLock::new();
        let types = TYPES.get_or_init(|| {
            RESULTS
                .iter()
                .map(|record| {
                    let fields = TyUserFields {
                        known: record
                            .fields
                            .iter()
                            .map(|(name, ty)| ((*name).to_string(), ty()))
                            .collect(),
                        unknown: false,
                    };
                    // A record's base: no methods, no operators, not iterable, as a struct.
                    // `None` as a supertype lets `r == None` pass (starlark refuses `==`
                    // between types that do not meet), at the price of a result passing
                    // where a helper declares `None`.
                    let ty = TyUser::new(
                        record.name.to_string(),
                        TyStarlarkValue::new::<Record>(),
                        TypeInstanceId::r#gen(),
                        TyUserParams {
                            fields,
                            supertypes: Ty::none().iter_union().to_vec(),
                            ..TyUserParams::default()
                        },
                    )
                    .expect("a record base that is neither callable, indexable nor iterable");
                    (record.name, Ty::custom(ty))
                })
                .collect()
        });
        types
            .get(self.name)
            .cloned()
            .expect("every record of RESULTS has its type")
    }
}

/// What a step builtin returns: a `struct` at run time, declared to the typechecker as the
/// record `T`.
pub(super) type Returns<'v, T> = ValueOfUnchecked<'v, T>;

/// The type of a step builtin's result, as the typechecker knows it.
pub(super) trait StepResultType: StarlarkTypeRepr {
    /// The builtin that returns it, whose record in [`RESULTS`] lists its fields.
    const BUILTIN: &'static str;
}

/// Defines the type of a step builtin's result.
macro_rules! result_type {
    ($($name:ident => $builtin:literal),* $(,)?) => {
        $(
            #[doc = concat!("The result of `", $builtin, "`.")]
            pub(super) struct $name;

            impl StepResultType for $name {
                const BUILTIN: &'static str = $builtin;
            }

            impl StarlarkTypeRepr for $name {
                type Canonical = Self;

                fn starlark_type_repr() -> Ty {
                    ResultRecord::of($builtin)
                        .expect("a step builtin has a result record")
                        .ty()
                }
            }
        )*
    };
}

result_type!(
    AutoResult => "auto",
    LlmResult => "llm",
    AskResult => "ask",
    CallScriptResult => "call_script",
    McpResult => "mcp",
);
