//! The types the step builtins declare to the typechecker ([`Declared`]), so that
//! `mekara check` finds a call such as `auto(42)` or `llm("x", expects = 5)` before the
//! script runs.
//!
//! Declaring is all they do: at run time a [`Declared`] parameter takes any value, and the
//! builtin checks it itself, with words that name the parameter and what it takes.

use std::marker::PhantomData;

use starlark::typing::Ty;
use starlark::values::type_repr::StarlarkTypeRepr;
use starlark::values::typing::StarlarkCallable;
use starlark::values::{UnpackValue, Value};

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
