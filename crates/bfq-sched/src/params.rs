//! Tunables as text: every scheduler's parameters are set by name with a textual value, like the
//! kernel's sysfs files (`slice_idle`, `timeout_sync`, ...; kernel-bfq-reference.md "Tunables"), so
//! job files, the CLI and the engine configure every scheduler the same way.

use crate::types::Nanos;

/// A tunable that could not be set: which scheduler, which key, what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// The scheduler has no tunable of that name.
    #[error("{scheduler}: unknown parameter `{key}` (known: {known})")]
    Unknown {
        /// Scheduler name.
        scheduler: &'static str,
        /// The key given.
        key: String,
        /// The known keys, comma-separated.
        known: String,
    },
    /// The value is not acceptable for that tunable.
    #[error("{scheduler}: parameter `{key}` = {value:?}: {expected}")]
    Invalid {
        /// Scheduler name.
        scheduler: &'static str,
        /// The key given.
        key: String,
        /// The value given.
        value: String,
        /// What was expected.
        expected: String,
    },
}

impl ParamError {
    /// An unknown key; `known` lists the keys the scheduler does accept.
    pub fn unknown(scheduler: &'static str, key: &str, known: &[&str]) -> Self {
        let known = if known.is_empty() { "none: it has no tunables".to_string() } else { known.join(", ") };
        ParamError::Unknown { scheduler, key: key.to_string(), known }
    }

    /// An invalid value for a known key.
    pub fn invalid(scheduler: &'static str, key: &str, value: &str, expected: impl Into<String>) -> Self {
        ParamError::Invalid {
            scheduler,
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }
}

/// Parses an unsigned integer in `min..=max`, for the tunable `key` of `scheduler`.
pub fn parse_u64(
    scheduler: &'static str,
    key: &str,
    value: &str,
    min: u64,
    max: u64,
) -> Result<u64, ParamError> {
    match value.trim().parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(ParamError::invalid(scheduler, key, value, format!("an integer from {min} to {max}"))),
    }
}

/// The name a tunable's value of a fixed set of choices is written (and read back) with: its entry in
/// `choices`, the table its parser reads (the first name if the value is missing from the table).
pub fn choice_name<T: PartialEq>(choices: &[(&'static str, T)], value: &T) -> &'static str {
    choices.iter().find(|(_, c)| c == value).map_or(choices.first().map_or("", |(n, _)| n), |(n, _)| n)
}

/// Parses a boolean written `0`/`1`, `true`/`false`, `on`/`off` or `yes`/`no`.
pub fn parse_bool(scheduler: &'static str, key: &str, value: &str) -> Result<bool, ParamError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(ParamError::invalid(scheduler, key, value, "0 or 1 (or true/false)")),
    }
}

/// Parses a duration for a tunable kept in its own unit (`unit_ns` nanoseconds per unit, e.g. `MSEC`
/// for a kernel tunable in milliseconds), into nanoseconds. A plain number is in that unit (as the
/// kernel's sysfs files take it); a number with a unit (`ns`, `us`, `ms`, `s`, e.g. `80ms`, `4.5ms`,
/// as the papers and job files write times) is converted. Either way it must lie in `min..=max` of
/// the tunable's unit.
pub fn parse_duration(
    scheduler: &'static str,
    key: &str,
    value: &str,
    unit_ns: Nanos,
    min: u64,
    max: u64,
) -> Result<Nanos, ParamError> {
    let unit_name = match unit_ns {
        1 => "ns",
        1_000 => "us",
        1_000_000 => "ms",
        1_000_000_000 => "s",
        _ => "units",
    };
    let invalid = || {
        ParamError::invalid(
            scheduler,
            key,
            value,
            format!(
                "a duration from {min} to {max} {unit_name}: a plain number in {unit_name}, or a number \
                 with a unit (ns, us, ms, s), e.g. `{min}` or `{min}{unit_name}`"
            ),
        )
    };
    let text = value.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let scale = match suffix.trim() {
        "" => unit_ns,
        "ns" => 1,
        "us" | "\u{b5}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(invalid()),
    };
    let nanos = if number.contains('.') {
        let x: f64 = number.parse().map_err(|_| invalid())?;
        let ns = x * scale as f64;
        if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 || ns.fract() != 0.0 {
            return Err(invalid());
        }
        ns as u64
    } else {
        let x: u64 = number.parse().map_err(|_| invalid())?;
        x.checked_mul(scale).ok_or_else(invalid)?
    };
    let (lo, hi) = (min.saturating_mul(unit_ns), max.saturating_mul(unit_ns));
    if (lo..=hi).contains(&nanos) {
        Ok(nanos)
    } else {
        Err(invalid())
    }
}

/// Parses a list of `key=value` pairs separated by commas (`"slice_idle=0,low_latency=0"`), as the CLI
/// accepts them. Empty input gives an empty list.
pub fn parse_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("expected key=value, got {item:?}"));
        };
        pairs.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MSEC;

    #[test]
    fn out_of_range_values_name_the_key_and_range() {
        let err = parse_u64("bfq", "back_seek_penalty", "0", 1, 100).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("back_seek_penalty") && text.contains("1 to 100"), "{text}");
    }

    #[test]
    fn durations_are_scaled_to_nanoseconds() {
        assert_eq!(parse_duration("bfq", "slice_idle", "8", MSEC, 0, 1000).unwrap(), 8 * MSEC);
    }

    #[test]
    fn durations_accept_a_unit_as_the_papers_write_them() {
        // data/published.toml and job files write "80ms", "4ms", "125ms" (seed 002's Tw = 4 ms).
        let d = |v: &str| parse_duration("scan-edf", "idle_wait", v, MSEC, 0, 1000);
        assert_eq!(d("4ms").unwrap(), 4 * MSEC);
        assert_eq!(d("4 ms").unwrap(), 4 * MSEC);
        assert_eq!(d("2500us").unwrap(), 2_500_000);
        assert_eq!(d("1.5ms").unwrap(), 1_500_000);
        assert_eq!(d("1s").unwrap(), 1000 * MSEC);
        assert_eq!(d("0").unwrap(), 0);
    }

    #[test]
    fn bad_durations_name_the_field_and_what_was_expected() {
        let d = |v: &str| parse_duration("scan-edf", "idle_wait", v, MSEC, 0, 1000);
        for bad in ["2s", "4 min", "ms", "-1ms", "1.0000001ns", "x"] {
            let text = d(bad).unwrap_err().to_string();
            assert!(
                text.contains("idle_wait") && text.contains("scan-edf") && text.contains("0 to 1000 ms"),
                "{bad}: {text}"
            );
        }
    }

    #[test]
    fn pairs_are_split_on_commas_and_equals() {
        let p = parse_pairs("slice_idle=0, low_latency=1").unwrap();
        assert_eq!(p, vec![("slice_idle".into(), "0".into()), ("low_latency".into(), "1".into())]);
        assert!(parse_pairs("slice_idle").is_err());
    }
}
