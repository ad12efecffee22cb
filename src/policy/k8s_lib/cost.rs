//! Static size measures of a compiled expression, for bounding evaluation
//! cost at load time.
//!
//! cel 0.15 has no run-time budget: no cost tracking, no comprehension
//! iteration limit, no cancellation. An expression such as
//! `lists.range(1000).all(a, lists.range(1000).all(b, ...))` runs to
//! completion on the request path. The only limits are at parse time (the
//! parser's 96-level nesting limit and its error-recovery limit). So the
//! engine should reject expressions whose shape allows runaway work before
//! they are ever evaluated, using these measures.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::Program;

/// How big an expression is. Evaluation work grows with `nodes` times the
/// product of the sizes of the lists iterated at each comprehension level,
/// so `comprehension_depth` is the figure to cap (Kubernetes' estimator
/// charges nested comprehensions multiplicatively for the same reason).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpressionSize {
    /// Number of AST nodes, after macro expansion.
    pub nodes: usize,
    /// Deepest nesting of comprehensions (`all`, `exists`, `map`, ...).
    pub comprehension_depth: usize,
}

/// Measures `program`.
pub fn expression_size(program: &Program) -> ExpressionSize {
    let mut size = ExpressionSize::default();
    measure(program.expression(), 0, &mut size);
    size
}

fn measure(expr: &IdedExpr, depth: usize, size: &mut ExpressionSize) {
    size.nodes += 1;
    size.comprehension_depth = size.comprehension_depth.max(depth);
    match &expr.expr {
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                measure(target, depth, size);
            }
            for arg in &call.args {
                measure(arg, depth, size);
            }
        }
        Expr::Comprehension(c) => {
            measure(&c.iter_range, depth, size);
            measure(&c.accu_init, depth, size);
            for inner in [&c.loop_cond, &c.loop_step] {
                measure(inner, depth + 1, size);
            }
            measure(&c.result, depth, size);
            size.comprehension_depth = size.comprehension_depth.max(depth + 1);
        }
        Expr::List(list) => list.elements.iter().for_each(|e| measure(e, depth, size)),
        Expr::Map(map) => map.entries.iter().for_each(|e| entry(&e.expr, depth, size)),
        Expr::Struct(s) => s.entries.iter().for_each(|e| entry(&e.expr, depth, size)),
        Expr::Select(select) => measure(&select.operand, depth, size),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry(entry: &EntryExpr, depth: usize, size: &mut ExpressionSize) {
    match entry {
        EntryExpr::MapEntry(e) => {
            measure(&e.key, depth, size);
            measure(&e.value, depth, size);
        }
        EntryExpr::StructField(f) => measure(&f.value, depth, size),
    }
}

#[cfg(test)]
mod tests {
    use super::expression_size;
    use crate::policy::k8s_lib::kubernetes_env;

    fn depth(source: &str) -> usize {
        let env = kubernetes_env().unwrap_or_else(|e| panic!("{e}"));
        let program = env.compile(source).unwrap_or_else(|e| panic!("{e}"));
        expression_size(&program).comprehension_depth
    }

    #[test]
    fn an_expression_without_macros_has_no_comprehension_depth() {
        assert_eq!(depth("quantity('1').isInteger() && 1 + 2 == 3"), 0);
    }

    #[test]
    fn nested_comprehensions_count_each_level() {
        assert_eq!(depth("[1].all(x, x > 0)"), 1);
        assert_eq!(depth("[[1]].all(xs, xs.exists(x, x > 0))"), 2);
        assert_eq!(depth("[1].map(x, x).filter(y, y > 0).size() == 1"), 1);
    }

    #[test]
    fn nodes_grow_with_the_expression() {
        let env = kubernetes_env().unwrap_or_else(|e| panic!("{e}"));
        let nodes = |source: &str| env.compile(source).map(|p| expression_size(&p).nodes).ok();
        assert_eq!((nodes("1"), nodes("1 + 2 * 3")), (Some(1), Some(5)));
    }
}
