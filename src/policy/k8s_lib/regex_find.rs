//! The Kubernetes regex library: `string.find(regex)`,
//! `string.findAll(regex)` and `string.findAll(regex, limit)`.
//!
//! Kubernetes compiles constant patterns once when the program is built;
//! cel overloads are plain `fn`s with no per-program state, so compiled
//! patterns are kept in a small per-thread cache instead. Patterns are RE2
//! syntax in both Go and the `regex` crate, and both guarantee linear-time
//! matching, so a policy cannot trigger catastrophic backtracking.

use super::{downcast, take_args};
use cel::common::types::{CelInt, CelList, CelString, INT_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use regex::{Regex, RegexBuilder};
use std::cell::RefCell;
use std::collections::HashMap;

/// Upper bound on a compiled pattern, so a policy cannot make the webhook
/// allocate without limit by writing `a{1000}{1000}`.
const COMPILED_SIZE_LIMIT: usize = 1 << 20;

/// How many compiled patterns each thread keeps. Policies use few distinct
/// patterns; when more show up the cache is simply emptied.
const CACHE_CAPACITY: usize = 128;

thread_local! {
    static CACHE: RefCell<HashMap<String, Regex>> = RefCell::new(HashMap::new());
}

/// Registers `find` and `findAll` on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "find",
        "string_find_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_limit,
    )?;
    Ok(())
}

/// The compiled `pattern`, from the cache when possible.
fn compiled(function: &str, pattern: &str) -> Result<Regex, ExecutionError> {
    if let Some(re) = CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = RegexBuilder::new(pattern)
        .size_limit(COMPILED_SIZE_LIMIT)
        .build()
        .map_err(|e| ExecutionError::function_error(function, format!("Illegal regex: {e}")))?;
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(pattern.to_owned(), re.clone());
    });
    Ok(re)
}

/// `s.find(re)`: the first match, or `''` when there is none.
fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, pattern] = take_args(args)?;
    let s = downcast::<CelString>(s.as_ref())?;
    let re = compiled("find", downcast::<CelString>(pattern.as_ref())?.inner())?;
    let found = re.find(s.inner()).map(|m| m.as_str()).unwrap_or_default();
    Ok(CowVal::owned(CelString::from(found.to_owned())))
}

/// `s.findAll(re)`: every match.
fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, pattern] = take_args(args)?;
    matches(s.as_ref(), pattern.as_ref(), None)
}

/// `s.findAll(re, n)`: at most `n` matches; a negative `n` means all, as in
/// Go's `FindAllString`.
fn find_all_limit<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, pattern, limit] = take_args(args)?;
    let limit = *downcast::<CelInt>(limit.as_ref())?.inner();
    matches(s.as_ref(), pattern.as_ref(), usize::try_from(limit).ok())
}

fn matches<'b, 'v>(
    s: &dyn Val,
    pattern: &dyn Val,
    limit: Option<usize>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = downcast::<CelString>(s)?;
    let re = compiled("findAll", downcast::<CelString>(pattern)?.inner())?;
    let found: Vec<Box<dyn Val + 'v>> = re
        .find_iter(s.inner())
        .take(limit.unwrap_or(usize::MAX))
        .map(|m| Box::new(CelString::from(m.as_str().to_owned())) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelList::from(found)))
}

#[cfg(test)]
mod tests {
    use crate::policy::k8s_lib::test_support::{assert_error, assert_true};

    #[test]
    fn find_returns_the_first_match_or_an_empty_string() {
        assert_true("'abc 123'.find('[0-9]+') == '123'");
        assert_true("'abc 123'.find('xyz') == ''");
    }

    #[test]
    fn find_all_returns_every_match_up_to_the_limit() {
        assert_true("'123 abc 456'.findAll('[0-9]+') == ['123', '456']");
        assert_true("'123 abc 456'.findAll('[0-9]+', 1) == ['123']");
        assert_true("'123 abc 456'.findAll('[0-9]+', -1) == ['123', '456']");
        assert_true("'123 abc 456'.findAll('[0-9]+', 0) == []");
        assert_true("'123 abc 456'.findAll('xyz') == []");
    }

    #[test]
    fn an_invalid_pattern_is_an_error_not_a_panic() {
        assert_error("'abc'.find('[')", "Illegal regex");
        assert_error("'abc'.findAll('(')", "Illegal regex");
    }

    #[test]
    fn a_pattern_too_large_to_compile_is_rejected() {
        assert_error("'abc'.find('a{1000}{1000}')", "Illegal regex");
    }
}
