//! Parsing of device parameter overrides given as text (`key=value`, like the schedulers' tunables):
//! each model lists its keys with a parser, and an error names what the key expects.

/// Parses a finite number in `min..=max` (decimal point allowed).
pub(crate) fn number(value: &str, min: f64, max: f64) -> Result<f64, String> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= min && *v <= max)
        .ok_or_else(|| format!("a number from {min} to {max}"))
}

/// Parses an integer in `min..=max`.
pub(crate) fn integer(value: &str, min: u64, max: u64) -> Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| format!("an integer from {min} to {max}"))
}

/// Parses a boolean written `true`/`false`, `1`/`0`, `on`/`off` or `yes`/`no`.
pub(crate) fn boolean(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err("true or false".to_string()),
    }
}

/// Milliseconds (fractional) to nanoseconds.
pub(crate) fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

/// Microseconds (fractional) to nanoseconds.
pub(crate) fn us_to_ns(us: f64) -> u64 {
    (us * 1e3).round() as u64
}
