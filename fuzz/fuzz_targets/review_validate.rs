//! Raw bytes posted to `/validate`, through `admission::answer` with the
//! shipped bundle. Checks the answer's shape and that the lazy review decides
//! exactly as the fully parsed `Value` does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nodescope::admission::answer;
use nodescope::metrics::Webhook;
use nodescope_fuzz::{check_answer, check_lazy_matches_value, decider};

fuzz_target!(|data: &[u8]| {
    let decider = decider();
    let result = answer(Webhook::Validate, data, decider);
    check_answer(data, &result);
    check_lazy_matches_value(data, &decider.policies, &decider.store);
});
