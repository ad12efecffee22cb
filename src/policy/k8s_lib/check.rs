//! Load-time detection of calls to functions the policy environment does
//! not declare.
//!
//! cel 0.15 has no type checker: `Env::compile` only parses and expands
//! macros, and a call to an unknown function (`'a'.lowerAscci()`) or a
//! method called as a global (`isSorted([1])`) compiles fine and fails only
//! when evaluated, i.e. on a live admission request. `Env` keeps its
//! function table private, so this module mirrors it in a [`FunctionSet`]
//! (kept honest by a test that calls every listed name on the real
//! environment) and walks the compiled AST against it.
//!
//! Only names and call style (global or method) are checked: cel picks an
//! overload by the run-time types of the arguments, and does not expose
//! the declared arities either.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::Program;
use std::collections::BTreeSet;
use std::fmt;

/// Global functions of `Env::stdlib()` (cel 0.15, `chrono` feature on).
const STDLIB_GLOBAL: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "matches",
    "size",
    "string",
    "timestamp",
    "type",
    "uint",
    "optional.none",
    "optional.of",
    "optional.ofNonZeroValue",
];

/// Methods of `Env::stdlib()`.
const STDLIB_MEMBER: &[&str] = &[
    "contains",
    "endsWith",
    "matches",
    "size",
    "startsWith",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
    "value",
    "hasValue",
    "or",
    "orValue",
];

/// Globals of cel's strings, lists, math and encoders extensions.
/// `math.@max`/`math.@min` are what `math.greatest`/`math.least` expand to.
const EXTENSION_GLOBAL: &[&str] = &[
    "strings.quote",
    "lists.range",
    "math.ceil",
    "math.floor",
    "math.round",
    "math.trunc",
    "math.isInf",
    "math.isNaN",
    "math.isFinite",
    "math.abs",
    "math.sign",
    "math.bitAnd",
    "math.bitOr",
    "math.bitXor",
    "math.bitNot",
    "math.bitShiftLeft",
    "math.bitShiftRight",
    "math.sqrt",
    "math.@max",
    "math.@min",
    "base64.encode",
    "base64.decode",
];

/// Methods of cel's strings and lists extensions. `@sortByAssociatedKeys`
/// is what `sortBy` expands to.
const EXTENSION_MEMBER: &[&str] = &[
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "format",
    "reverse",
    "slice",
    "flatten",
    "distinct",
    "sort",
    "@sortByAssociatedKeys",
];

/// Globals of the Kubernetes libraries in this module.
const KUBERNETES_GLOBAL: &[&str] = &[
    "quantity",
    "isQuantity",
    "sign",
    "url",
    "isURL",
    "ip",
    "isIP",
    "ip.isCanonical",
    "cidr",
    "isCIDR",
];

/// Methods of the Kubernetes libraries in this module.
const KUBERNETES_MEMBER: &[&str] = &[
    "isSorted",
    "sum",
    "min",
    "max",
    "find",
    "findAll",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "containsIP",
    "containsCIDR",
    "ip",
    "masked",
    "prefixLength",
    "add",
    "sub",
    "compareTo",
    "isGreaterThan",
    "isLessThan",
    "asInteger",
    "asApproximateFloat",
    "sign",
    "isInteger",
];

/// The function names an environment declares, by call style.
#[derive(Clone, Debug, Default)]
pub struct FunctionSet {
    global: BTreeSet<String>,
    member: BTreeSet<String>,
}

impl FunctionSet {
    /// Exactly what [`kubernetes_env`](super::kubernetes_env) declares.
    pub fn kubernetes() -> Self {
        let mut set = Self::default();
        for name in [STDLIB_GLOBAL, EXTENSION_GLOBAL, KUBERNETES_GLOBAL].concat() {
            set.add_global(name);
        }
        for name in [STDLIB_MEMBER, EXTENSION_MEMBER, KUBERNETES_MEMBER].concat() {
            set.add_member(name);
        }
        set
    }

    /// Declares a global function, e.g. one the engine adds to the `Env`.
    pub fn add_global(&mut self, name: &str) {
        self.global.insert(name.to_owned());
    }

    /// Declares a method.
    pub fn add_member(&mut self, name: &str) {
        self.member.insert(name.to_owned());
    }

    /// Whether `name(...)` resolves.
    pub fn has_global(&self, name: &str) -> bool {
        self.global.contains(name)
    }

    /// Whether `x.name(...)` resolves.
    pub fn has_member(&self, name: &str) -> bool {
        self.member.contains(name)
    }

    /// Every global name, for tests and diagnostics.
    pub fn globals(&self) -> impl Iterator<Item = &str> {
        self.global.iter().map(String::as_str)
    }

    /// Every method name, for tests and diagnostics.
    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.member.iter().map(String::as_str)
    }
}

/// A call to a function the environment does not declare.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct UnknownFunction {
    /// The function as called, `isSorted` or `math.cel`.
    pub name: String,
    /// Whether it was called as a method.
    pub member: bool,
    /// 1-based line of the call in the source.
    pub line: usize,
    /// 1-based column (in characters) of the call: cel records a call at
    /// its opening parenthesis.
    pub column: usize,
    /// Set when the name exists in the other call style.
    pub hint: Option<&'static str>,
}

impl fmt::Display for UnknownFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let style = if self.member { "method" } else { "function" };
        write!(
            f,
            "undeclared {style} '{}' at {}:{}",
            self.name, self.line, self.column
        )?;
        if let Some(hint) = self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

/// Reports every call in `program` to a function `functions` does not
/// declare, in source order, so a typo fails the policy at load time.
pub fn check_expression(
    functions: &FunctionSet,
    program: &Program,
) -> Result<(), Vec<UnknownFunction>> {
    let mut unknown = Vec::new();
    walk(functions, program.expression(), &mut unknown);
    if unknown.is_empty() {
        return Ok(());
    }
    let source = &program.source_info().source;
    let mut located: Vec<(u32, UnknownFunction)> = unknown
        .into_iter()
        .map(|(id, mut error)| {
            let start = program
                .source_info()
                .offset_for(id)
                .map_or(0, |(start, _)| start);
            (error.line, error.column) = line_and_column(source, start);
            (start, error)
        })
        .collect();
    located.sort_by_key(|(start, _)| *start);
    Err(located.into_iter().map(|(_, e)| e).collect())
}

/// Operators are evaluated by the interpreter itself, not looked up.
fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('@') || name == "!_" || name == "-_"
}

fn walk(functions: &FunctionSet, expr: &IdedExpr, out: &mut Vec<(u64, UnknownFunction)>) {
    match &expr.expr {
        Expr::Call(call) => {
            let mut descend_target = true;
            if !is_operator(&call.func_name) {
                let known = match &call.target {
                    None => functions.has_global(&call.func_name),
                    Some(target) => {
                        // `math.ceil(x)` is a call of `ceil` on the name `math`:
                        // cel resolves it as the global `math.ceil` first.
                        let qualified =
                            qualified_name(target).map(|name| format!("{name}.{}", call.func_name));
                        if qualified
                            .as_deref()
                            .is_some_and(|q| functions.has_global(q))
                        {
                            descend_target = false;
                            true
                        } else {
                            functions.has_member(&call.func_name)
                        }
                    }
                };
                if !known {
                    out.push((
                        expr.id,
                        unknown(functions, &call.func_name, call.target.is_some()),
                    ));
                }
            }
            if let Some(target) = call.target.as_deref().filter(|_| descend_target) {
                walk(functions, target, out);
            }
            for arg in &call.args {
                walk(functions, arg, out);
            }
        }
        Expr::Comprehension(c) => {
            for child in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk(functions, child, out);
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                walk(functions, element, out);
            }
        }
        Expr::Map(map) => walk_entries(functions, &map.entries, out),
        Expr::Struct(s) => walk_entries(functions, &s.entries, out),
        Expr::Select(select) => walk(functions, &select.operand, out),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// `a.b.c` for an identifier followed by field selections, as cel's
/// (private) `qualified_name_segments` does.
fn qualified_name(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => {
            qualified_name(&select.operand).map(|prefix| format!("{prefix}.{}", select.field))
        }
        _ => None,
    }
}

fn walk_entries(
    functions: &FunctionSet,
    entries: &[cel::common::ast::IdedEntryExpr],
    out: &mut Vec<(u64, UnknownFunction)>,
) {
    for entry in entries {
        match &entry.expr {
            EntryExpr::MapEntry(e) => {
                walk(functions, &e.key, out);
                walk(functions, &e.value, out);
            }
            EntryExpr::StructField(f) => walk(functions, &f.value, out),
        }
    }
}

fn unknown(functions: &FunctionSet, name: &str, member: bool) -> UnknownFunction {
    let hint = if member && functions.has_global(name) {
        Some("it is a global function: call it as name(x)")
    } else if !member && functions.has_member(name) {
        Some("it is a method: call it as x.name()")
    } else {
        None
    };
    UnknownFunction {
        name: name.to_owned(),
        member,
        line: 1,
        column: 1,
        hint,
    }
}

/// 1-based line and column of the `offset`-th character of `source`.
fn line_and_column(source: &str, offset: u32) -> (usize, usize) {
    let (mut line, mut column) = (1, 1);
    for c in source
        .chars()
        .take(usize::try_from(offset).unwrap_or(usize::MAX))
    {
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

#[cfg(test)]
mod tests;
