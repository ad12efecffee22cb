//! The CEL environment every nodescope policy is compiled against: cel's
//! standard library, its strings, lists, math and encoders extensions, and
//! the Kubernetes CEL libraries (quantity, lists, regex, URLs, IPs, CIDRs)
//! that policies written for Kubernetes admission expect to find.
//!
//! Semantics follow <https://kubernetes.io/docs/reference/using-api/cel/> so
//! that an expression copied from a ValidatingAdmissionPolicy behaves the
//! same here. Where the cel crate cannot express a Kubernetes rule (there is
//! no type checker), the difference is documented on the function.

pub mod cidr;
pub mod ip;
pub mod lists;
pub mod quantity;
pub mod regex_find;
pub mod urls;

#[cfg(test)]
mod format_tests;

use cel::common::types::Type;
use cel::common::value::{CowVal, FromVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// Why the policy environment could not be built. Only a programming error
/// (two libraries declaring the same overload) can cause it, but it is
/// reported rather than panicking so policy loading fails cleanly.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    /// A library declared an overload, type or macro that clashes with one
    /// already in the environment.
    #[error("registering the CEL {library} library failed: {source}")]
    Declaration {
        /// The library being registered when the clash happened.
        library: &'static str,
        /// What cel reported.
        #[source]
        source: DeclarationError,
    },
}

/// Built once at policy load; every policy expression is compiled against it.
///
/// Compile with [`Env::compile`] (not `Program::compile`) so the extension
/// macros (`sortBy`, `math.greatest`, ...) are expanded, then run the
/// program with `Context::with_env(Arc::new(env))`.
pub fn kubernetes_env() -> Result<Env, LibraryError> {
    let mut env = Env::stdlib();
    register(&mut env, "strings", cel::extensions::strings)?;
    register(&mut env, "lists", cel::extensions::lists)?;
    register(&mut env, "math", cel::extensions::math)?;
    register(&mut env, "encoders", cel::extensions::encoders)?;
    register(&mut env, "kubernetes.lists", lists::register)?;
    register(&mut env, "kubernetes.regex", regex_find::register)?;
    register(&mut env, "kubernetes.urls", urls::register)?;
    register(&mut env, "kubernetes.net.ip", ip::register)?;
    register(&mut env, "kubernetes.net.cidr", cidr::register)?;
    register(&mut env, "kubernetes.quantity", quantity::register)?;
    Ok(env)
}

fn register(
    env: &mut Env,
    library: &'static str,
    extension: impl FnOnce(&mut Env) -> Result<(), DeclarationError>,
) -> Result<(), LibraryError> {
    env.add_extension(extension)
        .map_err(|source| LibraryError::Declaration { library, source })
}

/// The `N` arguments of an overload. cel only calls an overload with the
/// arity it was declared with, so a mismatch is reported, never assumed.
pub(crate) fn take_args<'b, 'v, const N: usize>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<[CowVal<'b, 'v>; N], ExecutionError> {
    args.try_into()
        .map_err(|args: Vec<_>| ExecutionError::invalid_argument_count(N, args.len()))
}

/// `val` as the Rust type its overload parameter was declared with.
pub(crate) fn downcast<'b, 'v, T: FromVal<'b, 'v> + Val>(
    val: &'b (dyn Val + 'v),
) -> Result<&'b T, ExecutionError> {
    val.downcast_ref::<T>()
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: val.get_type().name().to_owned(),
            want: T::cel_type().name().to_owned(),
        })
}

/// Implements [`Val`] and `StaticVal` for an owned, immutable library type
/// (IP, CIDR, URL, Quantity): its CEL type, equality through `PartialEq`,
/// cloning and downcasting. Ordering and arithmetic are deliberately not
/// exposed as operators: Kubernetes only offers them as named methods.
macro_rules! opaque_val {
    ($rust:ty, $cel:expr) => {
        impl ::cel::common::value::Val for $rust {
            fn get_type(&self) -> &::cel::common::types::Type {
                $cel
            }

            fn cel_type() -> &'static ::cel::common::types::Type {
                $cel
            }

            fn equals(&self, other: &dyn ::cel::common::value::Val) -> bool {
                other.downcast_ref::<$rust>().is_some_and(|o| o == self)
            }

            fn clone_as_boxed<'v>(&self) -> Box<dyn ::cel::common::value::Val + 'v> {
                Box::new(self.clone())
            }

            fn as_any(&self) -> Option<&dyn ::std::any::Any> {
                Some(self)
            }
        }

        impl ::cel::common::value::StaticVal for $rust {}
    };
}
pub(crate) use opaque_val;

/// Registers `ty` so expressions can name it, e.g. `type(x) == net.IP`.
pub(crate) fn add_named_type(env: &mut Env, ty: &Type) -> Result<(), DeclarationError> {
    env.add_type(ty.to_owned())
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::kubernetes_env;
    use cel::{Context, ExecutionError, Value};
    use std::sync::{Arc, LazyLock};

    static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
        Arc::new(kubernetes_env().unwrap_or_else(|e| panic!("environment must build: {e}")))
    });

    /// Why a test expression did not produce a value.
    #[derive(Debug)]
    pub enum EvalError {
        Compile(#[allow(dead_code)] String),
        Execute(ExecutionError),
    }

    /// Compiles `expr` against [`kubernetes_env`] and runs it with no
    /// variables.
    pub fn eval(expr: &str) -> Result<Value, EvalError> {
        let program = ENV
            .compile(expr)
            .map_err(|e| EvalError::Compile(e.to_string()))?;
        let context = Context::with_env(Arc::clone(&ENV));
        program.execute(&context).map_err(EvalError::Execute)
    }

    /// Asserts that `expr` evaluates to `true`.
    #[track_caller]
    pub fn assert_true(expr: &str) {
        match eval(expr) {
            Ok(Value::Bool(true)) => {}
            other => panic!("`{expr}` should be true, got {other:?}"),
        }
    }

    /// Asserts that `expr` fails at run time with a message containing
    /// `needle`.
    #[track_caller]
    pub fn assert_error(expr: &str, needle: &str) {
        match eval(expr) {
            Err(EvalError::Execute(e)) if e.to_string().contains(needle) => {}
            other => panic!("`{expr}` should fail with `{needle}`, got {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::kubernetes_env;
    use super::test_support::assert_true;

    #[test]
    fn the_environment_builds_without_clashing_declarations() {
        assert!(kubernetes_env().is_ok());
    }

    #[test]
    fn the_cel_extensions_are_enabled() {
        assert_true("'TacoCat'.lowerAscii() == 'tacocat'");
        assert_true("[3, 1, 2].sort() == [1, 2, 3]");
        assert_true("math.greatest(1, 5, 3) == 5");
        assert_true("base64.encode(b'hello') == 'aGVsbG8='");
        assert_true("[1, 2, 3].exists(x, x > 2)");
    }
}
