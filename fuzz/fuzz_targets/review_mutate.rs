//! Raw bytes posted to `/mutate`, through the same `admission::answer` the
//! server calls. Checks the answer's shape, that a returned patch applies to
//! the request's object with valid quantities, and that a second pass over
//! the patched pod (apiserver reinvocation) returns no patch.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nodescope::admission::answer;
use nodescope::metrics::Webhook;
use nodescope_fuzz::{check_answer, decider, patched_object};

fuzz_target!(|data: &[u8]| {
    let first = answer(Webhook::Mutate, data, decider());
    check_answer(data, &first);
    let Some((mut review, object)) = patched_object(data, &first) else {
        return;
    };
    review["request"]["object"] = object;
    let body = serde_json::to_vec(&review).expect("a Value serializes");
    let second = answer(Webhook::Mutate, &body, decider());
    check_answer(&body, &second);
    assert!(
        patched_object(&body, &second).is_none(),
        "a second pass over the patched pod patched it again"
    );
});
