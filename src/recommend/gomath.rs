//! Go's float and time semantics, where upstream's numbers depend on them.
//!
//! Upstream is built with Go for linux/amd64 (VPA 1.7.1: `go 1.26`). To give
//! bit-identical numbers we port the few Go routines whose results are not
//! correctly rounded and so may differ from Rust's `libm` in the last bit:
//! `math.Log` (amd64 assembly `log_amd64.s`, same operation order as
//! `log.go`), `math.Exp2` (pure Go on amd64, `exp.go`), `math.Pow`
//! (`pow.go`, repeated squaring), `math.Frexp` / `math.Ldexp`. The Go
//! compiler does not fuse multiply-adds for the default `GOAMD64=v1`, and
//! neither does Rust, so the remaining arithmetic is plain IEEE 754.
//!
//! Times are nanoseconds since the Unix epoch as `i128`; Go's zero time
//! (0001-01-01T00:00:00Z) is the "unset" value upstream uses.

// The constants are Go's decimal literals verbatim; both compilers round
// them to the same nearest f64.
#![allow(clippy::excessive_precision)]

/// Go's `time.Time{}` in seconds since the Unix epoch.
pub(crate) const GO_ZERO_UNIX_SECS: i64 = -62_135_596_800;
const NANOS_PER_SEC: i128 = 1_000_000_000;
/// Go's zero time in nanoseconds since the Unix epoch.
pub(crate) const GO_ZERO_NANOS: i128 = GO_ZERO_UNIX_SECS as i128 * NANOS_PER_SEC;

const SHIFT: u32 = 52;
const MASK: u64 = 0x7FF;
const BIAS: i64 = 1023;
const SMALLEST_NORMAL: f64 = 2.225_073_858_507_201_4e-308;

fn normalize(x: f64) -> (f64, i64) {
    if x.abs() < SMALLEST_NORMAL {
        return (x * (1u64 << 52) as f64, -52);
    }
    (x, 0)
}

/// Go `math.Frexp`.
pub(crate) fn frexp(f: f64) -> (f64, i64) {
    if f == 0.0 || !f.is_finite() {
        return (f, 0);
    }
    let (f, mut exp) = normalize(f);
    let mut x = f.to_bits();
    exp += ((x >> SHIFT) & MASK) as i64 - BIAS + 1;
    x &= !(MASK << SHIFT);
    x |= ((BIAS - 1) as u64) << SHIFT;
    (f64::from_bits(x), exp)
}

/// Go `math.Ldexp`.
pub(crate) fn ldexp(frac: f64, exp: i64) -> f64 {
    if frac == 0.0 || !frac.is_finite() {
        return frac;
    }
    let (frac, e) = normalize(frac);
    let mut exp = exp.saturating_add(e);
    let mut x = frac.to_bits();
    exp = exp.saturating_add(((x >> SHIFT) & MASK) as i64 - BIAS);
    if exp < -1075 {
        return 0.0_f64.copysign(frac);
    }
    if exp > 1023 {
        return if frac < 0.0 {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    let mut m = 1.0;
    if exp < -1022 {
        exp += 53;
        m = 1.0 / (1u64 << 53) as f64;
    }
    x &= !(MASK << SHIFT);
    x |= ((exp + BIAS) as u64) << SHIFT;
    m * f64::from_bits(x)
}

/// Go `math.Log` as the amd64 assembly computes it (for positive normal
/// numbers identical to `log.go`).
pub(crate) fn log(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
    const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
    const L1: f64 = 6.666_666_666_666_735_130e-01;
    const L2: f64 = 3.999_999_999_940_941_908e-01;
    const L3: f64 = 2.857_142_874_366_239_149e-01;
    const L4: f64 = 2.222_219_843_214_978_396e-01;
    const L5: f64 = 1.818_357_216_161_805_012e-01;
    const L6: f64 = 1.531_383_769_920_937_332e-01;
    const L7: f64 = 1.479_819_860_511_658_591e-01;
    // Go's `math.Sqrt2 / 2`, the f64 nearest to 1/sqrt(2).
    const HALF_SQRT2: f64 = std::f64::consts::FRAC_1_SQRT_2;
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x < 0.0 {
        return f64::NAN;
    }
    // The assembly's frexp reads the exponent bits directly.
    let bits = x.to_bits();
    let mut f1 = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FE0_0000_0000_0000);
    let mut k = (((bits >> 52) & 0x7FF) as i64 - 0x3FE) as f64;
    if f1 < HALF_SQRT2 {
        k -= 1.0;
        f1 *= 2.0;
    }
    let f = f1 - 1.0;
    let s = f / (2.0 + f);
    let s2 = s * s;
    let s4 = s2 * s2;
    let t1 = s2 * (L1 + s4 * (L3 + s4 * (L5 + s4 * L7)));
    let t2 = s4 * (L2 + s4 * (L4 + s4 * L6));
    let r = t1 + t2;
    let hfsq = 0.5 * f * f;
    k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)
}

/// Go `math.Exp2` (pure Go on amd64).
pub(crate) fn exp2(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
    const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
    const OVERFLOW: f64 = 1.023_999_999_999_999_9e+03;
    const UNDERFLOW: f64 = -1.0740e+03;
    if x.is_nan() {
        return x;
    }
    if x > OVERFLOW {
        return f64::INFINITY;
    }
    if x < UNDERFLOW {
        return 0.0;
    }
    let k: i64 = if x > 0.0 {
        (x + 0.5) as i64
    } else if x < 0.0 {
        (x - 0.5) as i64
    } else {
        0
    };
    let t = x - k as f64;
    let hi = t * LN2_HI;
    let lo = -t * LN2_LO;
    expmulti(hi, lo, k)
}

fn expmulti(hi: f64, lo: f64, k: i64) -> f64 {
    const P1: f64 = 1.666_666_666_666_666_574_15e-01;
    const P2: f64 = -2.777_777_777_701_559_338_42e-03;
    const P3: f64 = 6.613_756_321_437_934_361_17e-05;
    const P4: f64 = -1.653_390_220_546_525_153_90e-06;
    const P5: f64 = 4.138_136_797_057_238_460_39e-08;
    let r = hi - lo;
    let t = r * r;
    let c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
    let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    ldexp(y, k)
}

/// Go `math.Pow`. Bit-exact for integral `y` (the only exponents upstream
/// uses); a fractional part goes through Rust's `exp`/`ln`, which may differ
/// from Go's amd64 `Exp` in the last bit.
pub(crate) fn pow(x: f64, y: f64) -> f64 {
    if y == 0.0 || x == 1.0 {
        return 1.0;
    }
    if y == 1.0 {
        return x;
    }
    if x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    if x == 0.0 {
        let odd = is_odd_int(y);
        if y < 0.0 {
            return if x.is_sign_negative() && odd {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
        }
        return if x.is_sign_negative() && odd { x } else { 0.0 };
    }
    if y.is_infinite() {
        return if x == -1.0 {
            1.0
        } else if (x.abs() < 1.0) == (y > 0.0) {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if x.is_infinite() {
        if x < 0.0 {
            return pow(1.0 / x, -y);
        }
        return if y < 0.0 { 0.0 } else { f64::INFINITY };
    }
    if y == 0.5 {
        return x.sqrt();
    }
    if y == -0.5 {
        return 1.0 / x.sqrt();
    }
    let ya = y.abs();
    let mut yi = ya.trunc();
    let mut yf = ya - yi;
    if yf != 0.0 && x < 0.0 {
        return f64::NAN;
    }
    if yi >= 9.223_372_036_854_775_808e18 {
        return if x == -1.0 {
            1.0
        } else if (x.abs() < 1.0) == (y > 0.0) {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let mut a1 = 1.0;
    let mut ae: i64 = 0;
    if yf != 0.0 {
        if yf > 0.5 {
            yf -= 1.0;
            yi += 1.0;
        }
        a1 = (yf * x.ln()).exp();
    }
    let (mut x1, mut xe) = frexp(x);
    let mut i = yi as i64;
    while i != 0 {
        if !(-(1 << 12)..=(1 << 12)).contains(&xe) {
            ae += xe;
            break;
        }
        if i & 1 == 1 {
            a1 *= x1;
            ae += xe;
        }
        x1 *= x1;
        xe <<= 1;
        if x1 < 0.5 {
            x1 += x1;
            xe -= 1;
        }
        i >>= 1;
    }
    if y < 0.0 {
        a1 = 1.0 / a1;
        ae = -ae;
    }
    ldexp(a1, ae)
}

fn is_odd_int(x: f64) -> bool {
    if x.abs() >= (1u64 << 53) as f64 {
        return false;
    }
    let xi = x.trunc();
    xi == x && (xi as i64) & 1 == 1
}

/// Go `math.Min`.
pub(crate) fn min(x: f64, y: f64) -> f64 {
    if x == f64::NEG_INFINITY || y == f64::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    if x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    if x == 0.0 && x == y {
        return if x.is_sign_negative() { x } else { y };
    }
    if x < y {
        x
    } else {
        y
    }
}

/// Go `math.Max`.
pub(crate) fn max(x: f64, y: f64) -> f64 {
    if x == f64::INFINITY || y == f64::INFINITY {
        return f64::INFINITY;
    }
    if x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    if x == 0.0 && x == y {
        return if x.is_sign_negative() { y } else { x };
    }
    if x > y {
        x
    } else {
        y
    }
}

/// `decaying_histogram.go`'s `round`: `int(math.Floor(x + 0.5))`.
pub(crate) fn round_half_up(x: f64) -> i64 {
    (x + 0.5).floor() as i64
}

/// Go float64 → int64 conversion on amd64 (`CVTTSD2SQ`): truncation, and
/// the "integer indefinite" value `i64::MIN` for NaN and out-of-range values.
pub(crate) fn f64_to_i64_amd64(x: f64) -> i64 {
    if !(-9.223_372_036_854_775_808e18..9.223_372_036_854_775_808e18).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// A `std::time::Duration` as Go's `time.Duration` (int64 nanoseconds),
/// saturating; zero becomes 1 ns (upstream would divide by zero).
pub(crate) fn duration_nanos(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX).max(1)
}

/// Go `t.Sub(u)`: saturates at the int64 `Duration` range.
pub(crate) fn time_sub(t: i128, u: i128) -> i64 {
    let d = t - u;
    i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
}

/// Go `t.Round(d)`: to the nearest multiple of `d` since Go's zero time,
/// halfway values rounding up.
pub(crate) fn time_round(t: i128, d: i64) -> i128 {
    if d <= 0 {
        return t;
    }
    let d = i128::from(d);
    let r = (t - GO_ZERO_NANOS).rem_euclid(d);
    if r + r < d {
        t - r
    } else {
        t + (d - r)
    }
}

/// Go `time.Duration.Minutes()`.
pub(crate) fn duration_minutes(d: i64) -> f64 {
    const MINUTE: i64 = 60_000_000_000;
    let min = d / MINUTE;
    let nsec = d % MINUTE;
    min as f64 + nsec as f64 / (60.0 * 1e9)
}

/// A time kept as whole seconds and nanoseconds (12 bytes of payload, so
/// that it packs next to a `u16`/`u32` without padding).
pub(crate) fn split_nanos(t: i128) -> (i64, u32) {
    let secs = t.div_euclid(NANOS_PER_SEC);
    let nanos = t.rem_euclid(NANOS_PER_SEC) as u32;
    (
        i64::try_from(secs).unwrap_or(if secs < 0 { i64::MIN } else { i64::MAX }),
        nanos,
    )
}

/// The inverse of [`split_nanos`].
pub(crate) fn join_nanos(secs: i64, nanos: u32) -> i128 {
    i128::from(secs) * NANOS_PER_SEC + i128::from(nanos)
}

/// A jiff timestamp as [`split_nanos`] of its nanoseconds would give it,
/// without the i128 division.
pub(crate) fn split_timestamp(t: k8s_openapi::jiff::Timestamp) -> (i64, u32) {
    let (secs, nanos) = (t.as_second(), t.subsec_nanosecond());
    if nanos < 0 {
        (secs - 1, (nanos + 1_000_000_000).unsigned_abs())
    } else {
        (secs, nanos.unsigned_abs())
    }
}

/// A jiff timestamp in nanoseconds since the Unix epoch.
pub(crate) fn timestamp_nanos(t: k8s_openapi::jiff::Timestamp) -> i128 {
    t.as_nanosecond()
}

/// Nanoseconds since the Unix epoch as a jiff timestamp, clamped to jiff's
/// range (years -9999..=9999; only reachable by rounding a reference time
/// at the very end of that range).
pub(crate) fn nanos_timestamp(t: i128) -> k8s_openapi::jiff::Timestamp {
    use k8s_openapi::jiff::Timestamp;
    Timestamp::from_nanosecond(t).unwrap_or(if t < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}
