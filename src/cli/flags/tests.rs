//! Go's duration syntax, and the ranges each kind of flag states.

use super::*;

fn secs(s: u64) -> Result<Duration, String> {
    Ok(Duration::from_secs(s))
}

#[test]
fn durations_are_read_as_gos_time_parse_duration_reads_them() {
    assert_eq!(parse_duration("30s"), secs(30));
    assert_eq!(parse_duration("2m"), secs(120));
    assert_eq!(parse_duration("1h30m"), secs(5400));
    assert_eq!(parse_duration("12h0m0s"), secs(43_200));
    assert_eq!(parse_duration("1.5h"), secs(5400));
    assert_eq!(parse_duration(".5s"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("1m0.5s"), Ok(Duration::from_millis(60_500)));
    assert_eq!(parse_duration("3us"), Ok(Duration::from_micros(3)));
    assert_eq!(parse_duration("3µs"), Ok(Duration::from_micros(3)));
    assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
    assert_eq!(parse_duration("0"), secs(0));
    assert_eq!(parse_duration("+10s"), secs(10));
    assert_eq!(
        parse_duration("2562047h47m16.854775807s"),
        Ok(Duration::from_nanos(i64::MAX as u64))
    );
}

#[test]
fn a_duration_go_refuses_is_refused_with_the_syntax_it_takes() {
    let syntax = "such as 30s, 1.5m, 1h30m or 12h0m0s (units ns, us, ms, s, m, h)";
    assert_eq!(
        parse_duration("7"),
        Err(format!(
            "\"7\" has a number without a unit: write 7s for seconds ({syntax})"
        ))
    );
    assert_eq!(
        parse_duration("3d"),
        Err(format!(
            "\"3d\" has unknown unit \"d\": a duration is written {syntax}"
        ))
    );
    assert_eq!(
        parse_duration("soon"),
        Err(format!("\"soon\" is not a duration {syntax}"))
    );
    assert_eq!(
        parse_duration("1h 30m"),
        Err(format!(
            "\"1h 30m\" has unknown unit \"h \": a duration is written {syntax}"
        ))
    );
    assert_eq!(
        parse_duration(""),
        Err(format!("expected a duration {syntax}"))
    );
    assert_eq!(
        parse_duration("-1s"),
        Err("\"-1s\": a duration cannot be negative".into())
    );
    assert_eq!(
        parse_duration("2562048h"),
        Err("\"2562048h\" is longer than a duration can be (about 292 years)".into())
    );
}

#[test]
fn an_interval_of_zero_and_a_lease_under_two_seconds_are_refused() {
    assert_eq!(
        interval("0s"),
        Err("\"0s\": the interval must be longer than 0 (such as 10s)".into())
    );
    assert_eq!(interval("1ms"), Ok(Duration::from_millis(1)));
    for bad in ["1s", "2.5s", "0"] {
        assert_eq!(
            lease_duration(bad),
            Err(format!(
                "{bad:?}: a Lease duration is whole seconds, at least 2s (such as 15s)"
            ))
        );
    }
    assert_eq!(lease_duration("2s"), secs(2));
}

#[test]
fn numbers_outside_their_range_are_refused_with_the_range() {
    assert_eq!(fraction("1"), Ok(1.0));
    for bad in ["0", "-1", "1.5", "NaN", "inf", "x"] {
        assert_eq!(
            fraction(bad),
            Err(format!("expected a fraction in (0, 1], not {bad:?}"))
        );
    }
    assert_eq!(positive("0.1"), Ok(0.1));
    for bad in ["0", "-1", "NaN", "inf"] {
        assert_eq!(
            positive(bad),
            Err(format!("expected a finite number > 0, not {bad:?}"))
        );
    }
    assert_eq!(finite("-1"), Ok(-1.0));
    assert_eq!(
        finite("NaN"),
        Err("expected a finite number, not \"NaN\"".into())
    );
    assert_eq!(
        count("-1"),
        Err("expected a whole number >= 1, not \"-1\"".into())
    );
    assert_eq!(
        count("0"),
        Err("expected a whole number >= 1, not \"0\"".into())
    );
    assert_eq!(count("3"), Ok(3));
    assert_eq!(percentile("0"), Ok(0.0));
    assert_eq!(
        percentile("95"),
        Err("expected a percentile in [0, 1], not \"95\"".into())
    );
    assert_eq!(
        ratio("0.5"),
        Err("expected a finite number >= 1, not \"0.5\"".into())
    );
    assert_eq!(
        seconds("0"),
        Err("expected a whole number of seconds >= 1, not \"0\"".into())
    );
    assert_eq!(seconds_or_zero("0"), Ok(0));
    assert_eq!(
        non_negative("-0.5"),
        Err("expected a finite number >= 0, not \"-0.5\"".into())
    );
}

#[test]
fn listen_addresses_take_upstreams_port_only_form_as_every_ipv4_interface() {
    let addr = |s: &str| s.parse::<std::net::SocketAddr>().map_err(|e| e.to_string());
    assert_eq!(listen_address(":8943"), addr("0.0.0.0:8943"));
    assert_eq!(listen_address("127.0.0.1:0"), addr("127.0.0.1:0"));
    assert_eq!(listen_address("[::]:8942"), addr("[::]:8942"));
    for bad in [
        "",
        ":",
        "8943",
        ":http",
        "localhost:8943",
        "::8943",
        ":65536",
    ] {
        assert_eq!(
            listen_address(bad),
            Err(format!(
                "expected HOST:PORT or :PORT (such as 0.0.0.0:8943 or :8943), not {bad:?}"
            )),
            "{bad}"
        );
    }
}

#[test]
fn a_log_level_that_is_not_a_level_is_refused_rather_than_silencing_the_log() {
    let not_a_level = |value: &str, directive: &str| {
        Err(format!(
            "{value:?} is not a log filter ({directive:?} is not a level: expected one of \
             \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or MODULE=LEVEL); \
             such as info, or info,nodescope=debug"
        ))
    };
    for word in ["nonsense", "warning", "eror", "nodescope"] {
        assert_eq!(log_filter(word), not_a_level(word, word), "{word}");
    }
    assert_eq!(
        log_filter("info, warning"),
        not_a_level("info, warning", "warning")
    );
    assert_eq!(
        log_filter(""),
        Err(
            "\"\" is not a log filter (it names no level, so nothing would be logged); \
             such as info, or info,nodescope=debug"
                .to_owned()
        )
    );
    for good in [
        "info",
        "WARN",
        "off",
        "3",
        "info,nodescope=debug",
        "nodescope=debug",
        "info,nodescope::update::told=debug",
    ] {
        assert_eq!(log_filter(good), Ok(good.to_owned()), "{good}");
    }
}
