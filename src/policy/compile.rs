//! Compiling policy expressions once, at load, with the checks cel 0.15 lacks.
//!
//! cel-rust has no type checker, so besides parsing, every expression's AST is
//! walked to report at load time what cel-go would: unknown functions (probed
//! against the environment), undeclared identifiers, `params` without a
//! `paramKind`, and `variables.x` naming no (earlier) variable. The walk also
//! records which variables an expression needs, so evaluation computes only
//! those, lazily.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::{Context, Env, ExecutionError, Program};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The identifiers Kubernetes binds for ValidatingAdmissionPolicy expressions.
const ROOTS: [&str; 6] = [
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
];

/// Names CEL resolves to type values (`type(x) == string`).
const TYPE_NAMES: [&str; 13] = [
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "timestamp",
    "type",
    "uint",
];

/// A compiled expression with the variables it needs.
#[derive(Debug)]
pub(crate) struct CompiledExpression {
    /// The expression as written, for messages.
    pub(crate) source: String,
    pub(crate) program: Program,
    /// Indices of the policy variables this expression needs, directly or
    /// through other variables, in declaration order.
    pub(crate) needs: Vec<usize>,
    /// The part of `needs` that every evaluation reads: variables named
    /// outside the right operand of `&&`/`||`, the branches of `?:` and the
    /// bodies of comprehensions (and, transitively, what those variables
    /// certainly read). Evaluation computes these up front; the rest only
    /// when an evaluation actually reaches them, as the apiserver's lazy
    /// variables do.
    pub(crate) certain: Vec<usize>,
    /// Whether the expression reads `variables` itself (`variables[...]`,
    /// `has(variables.x)`), not only `variables.x`: evaluation then binds the
    /// `variables` map. `variables.x` alone resolves to the binding
    /// `variables.x` (CEL's qualified-name resolution), so no map is built.
    pub(crate) whole_variables: bool,
}

/// Why one expression was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompileIssue {
    pub(crate) message: String,
    /// 1-based line and column within the expression, when known.
    pub(crate) position: Option<(usize, usize)>,
}

/// What an expression may refer to.
pub(crate) struct Scope<'a> {
    /// Variables declared so far (all of them for validations), with the
    /// variables each of them needs.
    pub(crate) variables: &'a [(String, Vec<usize>)],
    /// For each variable in `variables`, the variables it certainly reads
    /// (see [`CompiledExpression::certain`]); missing entries read none.
    pub(crate) certain: &'a [Vec<usize>],
    /// Whether the policy has a `paramKind`, which declares `params`.
    pub(crate) has_params: bool,
}

/// Compiles expressions against one environment, caching function probes.
pub(crate) struct Compiler {
    env: Arc<Env>,
    known_functions: HashMap<(bool, String), bool>,
}

impl Compiler {
    pub(crate) fn new(env: Arc<Env>) -> Self {
        Compiler {
            env,
            known_functions: HashMap::new(),
        }
    }

    pub(crate) fn env(&self) -> &Arc<Env> {
        &self.env
    }

    /// Parses and checks one expression.
    pub(crate) fn compile(
        &mut self,
        source: &str,
        scope: &Scope<'_>,
    ) -> Result<CompiledExpression, CompileIssue> {
        let program = self.env.compile(source).map_err(|errors| {
            let first = errors.errors.first();
            CompileIssue {
                message: first
                    .map(|e| e.msg.clone())
                    .unwrap_or_else(|| errors.to_string()),
                position: first.map(|e| (e.pos.0.max(1) as usize, e.pos.1.max(0) as usize + 1)),
            }
        })?;
        let mut walk = Walk {
            compiler: self,
            scope,
            source,
            locals: Vec::new(),
            needs: Vec::new(),
            certain: Vec::new(),
            conditional: 0,
            whole_variables: false,
            program: &program,
        };
        walk.check(program.expression())?;
        let whole_variables = walk.whole_variables;
        let mut needs = walk.needs;
        needs.sort_unstable();
        needs.dedup();
        let mut certain = walk.certain;
        certain.sort_unstable();
        certain.dedup();
        Ok(CompiledExpression {
            source: source.to_owned(),
            program,
            needs,
            certain,
            whole_variables,
        })
    }

    /// Whether the environment declares `name`, called as a member function
    /// (`x.name()`) or globally (`name()`, `ns.name()`). cel-rust has no
    /// declaration lookup, so a zero-argument call is executed: an undeclared
    /// function fails with `UndeclaredReference`, a declared one with an
    /// overload error.
    fn function_known(&mut self, name: &str, member: bool) -> bool {
        if let Some(known) = self.known_functions.get(&(member, name.to_owned())) {
            return *known;
        }
        let probe = if member {
            format!("null.{name}()")
        } else {
            format!("{name}()")
        };
        let known = match self.env.compile(&probe) {
            // A macro that needs arguments: declared.
            Err(_) => true,
            Ok(program) => {
                let context = Context::with_env(Arc::clone(&self.env));
                !matches!(
                    catch_unwind(AssertUnwindSafe(|| program.execute(&context))),
                    Ok(Err(ExecutionError::UndeclaredReference(_)))
                )
            }
        };
        self.known_functions
            .insert((member, name.to_owned()), known);
        known
    }
}

struct Walk<'c, 's> {
    compiler: &'c mut Compiler,
    scope: &'s Scope<'s>,
    source: &'s str,
    locals: Vec<String>,
    needs: Vec<usize>,
    certain: Vec<usize>,
    /// How many operands that may not be evaluated enclose the current node.
    conditional: u32,
    whole_variables: bool,
    program: &'s Program,
}

impl Walk<'_, '_> {
    fn issue(&self, expr: &IdedExpr, message: String) -> CompileIssue {
        let position = self
            .program
            .source_info()
            .offset_for(expr.id)
            .map(|(start, _)| line_column(self.source, start as usize));
        CompileIssue { message, position }
    }

    fn is_local(&self, name: &str) -> bool {
        self.locals.iter().any(|l| l == name)
    }

    fn need_variable(&mut self, expr: &IdedExpr, name: &str) -> Result<(), CompileIssue> {
        let Some(index) = self.scope.variables.iter().position(|(n, _)| n == name) else {
            return Err(self.issue(
                expr,
                format!("undeclared reference to 'variables.{name}': no such variable is declared before this expression"),
            ));
        };
        self.needs.push(index);
        self.needs.extend_from_slice(&self.scope.variables[index].1);
        if self.conditional == 0 {
            self.certain.push(index);
            if let Some(certain) = self.scope.certain.get(index) {
                self.certain.extend_from_slice(certain);
            }
        }
        Ok(())
    }

    /// Checks a node that an evaluation may skip.
    fn check_conditional(&mut self, expr: &IdedExpr) -> Result<(), CompileIssue> {
        self.conditional += 1;
        let result = self.check(expr);
        self.conditional -= 1;
        result
    }

    fn check(&mut self, expr: &IdedExpr) -> Result<(), CompileIssue> {
        match &expr.expr {
            Expr::Unspecified | Expr::Literal(_) => Ok(()),
            Expr::Ident(name) => self.check_ident(expr, name),
            Expr::Select(select) => match &select.operand.expr {
                Expr::Ident(root) if root == "variables" && !self.is_local(root) => {
                    // `has(variables.x)` reads the map itself.
                    self.whole_variables |= select.test;
                    self.need_variable(expr, &select.field)
                }
                _ => self.check(&select.operand),
            },
            Expr::Call(call) => {
                let operator = call.func_name.starts_with(['_', '!', '-', '@'])
                    || call.func_name.contains('@');
                // `base64.encode(x)`: a namespace, not a receiver.
                let namespace = call
                    .target
                    .as_deref()
                    .and_then(qualified_name)
                    .filter(|segments| !self.is_local(segments[0]) && !ROOTS.contains(&segments[0]))
                    .map(|segments| segments.join("."));
                let known = operator
                    || match &namespace {
                        Some(namespace) => self
                            .compiler
                            .function_known(&format!("{namespace}.{}", call.func_name), false),
                        None => self
                            .compiler
                            .function_known(&call.func_name, call.target.is_some()),
                    };
                if !known {
                    let name = match &namespace {
                        Some(namespace) => format!("{namespace}.{}", call.func_name),
                        None => call.func_name.clone(),
                    };
                    let mut issue = self.issue(expr, format!("undeclared reference to '{name}'"));
                    // cel places a call at its '('; point at the name instead.
                    if let Some((_, column)) = issue.position.as_mut() {
                        *column = column.saturating_sub(call.func_name.chars().count()).max(1);
                    }
                    return Err(issue);
                }
                if let (Some(target), None) = (&call.target, &namespace) {
                    self.check(target)?;
                }
                // Only the first operand of `&&`, `||` and `?:` is always
                // evaluated; every other call evaluates all its arguments.
                let lazy_rest = call.target.is_none()
                    && matches!(call.func_name.as_str(), "_&&_" | "_||_" | "_?_:_");
                for (i, arg) in call.args.iter().enumerate() {
                    if lazy_rest && i > 0 {
                        self.check_conditional(arg)?;
                    } else {
                        self.check(arg)?;
                    }
                }
                Ok(())
            }
            Expr::Comprehension(comprehension) => {
                self.check(&comprehension.iter_range)?;
                self.check(&comprehension.accu_init)?;
                let depth = self.locals.len();
                self.locals.push(comprehension.iter_var.clone());
                if let Some(second) = &comprehension.iter_var2 {
                    self.locals.push(second.clone());
                }
                self.locals.push(comprehension.accu_var.clone());
                let result = self
                    .check_conditional(&comprehension.loop_cond)
                    .and_then(|()| self.check_conditional(&comprehension.loop_step))
                    .and_then(|()| self.check_conditional(&comprehension.result));
                self.locals.truncate(depth);
                result
            }
            Expr::List(list) => list.elements.iter().try_for_each(|e| self.check(e)),
            Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::StructField(field) => self.check(&field.value),
                EntryExpr::MapEntry(entry) => {
                    self.check(&entry.key)?;
                    self.check(&entry.value)
                }
            }),
            Expr::Struct(structure) => structure.entries.iter().try_for_each(|entry| match &entry
                .expr
            {
                EntryExpr::StructField(field) => self.check(&field.value),
                EntryExpr::MapEntry(entry) => {
                    self.check(&entry.key)?;
                    self.check(&entry.value)
                }
            }),
        }
    }

    fn check_ident(&mut self, expr: &IdedExpr, name: &str) -> Result<(), CompileIssue> {
        if self.is_local(name) || name.starts_with('@') || name.starts_with("__") {
            return Ok(());
        }
        if name == "params" && !self.scope.has_params {
            return Err(self.issue(
                expr,
                "undeclared reference to 'params': the policy has no spec.paramKind".to_owned(),
            ));
        }
        if name == "variables" {
            // `variables[...]` or `variables` as a whole: needs all of them.
            self.whole_variables = true;
            for index in 0..self.scope.variables.len() {
                self.needs.push(index);
            }
            return Ok(());
        }
        if ROOTS.contains(&name) || TYPE_NAMES.contains(&name) {
            return Ok(());
        }
        let hint = if name == "authorizer" {
            " (authorizer checks are not supported by nodescope)"
        } else {
            ""
        };
        Err(self.issue(expr, format!("undeclared reference to '{name}'{hint}")))
    }
}

/// `a.b.c` as `["a", "b", "c"]`, if the expression is only identifiers.
fn qualified_name(expr: &IdedExpr) -> Option<Vec<&str>> {
    match &expr.expr {
        Expr::Ident(name) => Some(vec![name.as_str()]),
        Expr::Select(select) if !select.test => {
            let mut segments = qualified_name(&select.operand)?;
            segments.push(select.field.as_str());
            Some(segments)
        }
        _ => None,
    }
}

/// 1-based line and column of a character offset.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for c in source.chars().take(offset) {
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
mod tests {
    use super::*;

    fn compiler() -> Compiler {
        let env = crate::policy::k8s_lib::kubernetes_env().expect("the library builds");
        Compiler::new(Arc::new(env))
    }

    fn compile(source: &str) -> Result<CompiledExpression, CompileIssue> {
        let variables = vec![("first".to_owned(), vec![]), ("second".to_owned(), vec![0])];
        compiler().compile(
            source,
            &Scope {
                variables: &variables,
                certain: &[],
                has_params: false,
            },
        )
    }

    #[test]
    fn a_known_function_compiles() {
        assert!(compile("object.metadata.name.startsWith('a') && size(object.x) > 0").is_ok());
        assert!(compile("object.items.all(i, i.name.lowerAscii() == 'a')").is_ok());
        assert!(compile("base64.encode(b'a') != ''").is_ok());
    }

    #[test]
    fn an_unknown_function_is_reported_with_its_position() {
        let issue = compile("object.a &&\n  object.b.frobnicate()").expect_err("unknown");
        assert_eq!(issue.message, "undeclared reference to 'frobnicate'");
        assert_eq!(issue.position, Some((2, 12)));
        let issue = compile("frob(object)").expect_err("unknown");
        assert_eq!(issue.message, "undeclared reference to 'frob'");
    }

    #[test]
    fn an_undeclared_identifier_is_reported() {
        let issue = compile("objekt.spec == 1").expect_err("unknown");
        assert_eq!(issue.message, "undeclared reference to 'objekt'");
        assert_eq!(issue.position, Some((1, 1)));
    }

    #[test]
    fn params_needs_a_param_kind() {
        let issue = compile("params.data.x == 'y'").expect_err("no paramKind");
        assert_eq!(
            issue.message,
            "undeclared reference to 'params': the policy has no spec.paramKind"
        );
    }

    #[test]
    fn comprehension_variables_are_in_scope_only_inside_the_loop() {
        assert!(compile("object.items.exists(x, x == 1)").is_ok());
        assert!(compile("object.items.exists(x, x == 1) && x == 2").is_err());
    }

    #[test]
    fn variables_needed_include_those_they_depend_on() {
        let compiled = compile("variables.second == 1").expect("compiles");
        assert_eq!(compiled.needs, vec![0, 1]);
        assert!(!compiled.whole_variables);
        assert!(
            compile("has(variables.first)")
                .expect("compiles")
                .whole_variables
        );
        assert!(
            compile("variables['first'] == 1")
                .expect("compiles")
                .whole_variables
        );
        assert!(
            !compile("[1].exists(variables, variables == 1)")
                .expect("compiles")
                .whole_variables
        );
        let issue = compile("variables.third == 1").expect_err("undeclared");
        assert!(issue.message.contains("'variables.third'"));
    }

    #[test]
    fn a_parse_error_carries_its_position() {
        let issue = compile("object.spec ==").expect_err("parse error");
        assert!(issue.position.is_some());
    }
}
