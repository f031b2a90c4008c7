//! Cron expressions in a time zone: parsing and the occurrences after a given instant.

use chrono::{DateTime, Utc};
use croner::parser::CronParser;
use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use snatch_protocol::SnatchError;

/// The macros an expression may be instead of its fields.
const MACROS: [&str; 6] = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly"];

/// A field of an expression: its name, the numbers it takes, and how its values are written.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static str,
}

/// The fields of a six-field expression, in order (a five-field one has no second).
const FIELDS: [Field; 6] = [
    Field { name: "second", min: 0, max: 59, names: "" },
    Field { name: "minute", min: 0, max: 59, names: "" },
    Field { name: "hour", min: 0, max: 23, names: "" },
    Field { name: "day of month", min: 1, max: 31, names: "" },
    Field { name: "month", min: 1, max: 12, names: " or JAN-DEC" },
    Field { name: "day of week", min: 0, max: 7, names: " (0 and 7: Sunday) or SUN-SAT" },
];

/// What is wrong with the first field of `expression` (5 or 6 fields) that croner refuses on its own, every other
/// field being `*`: its name and value, and why. None when each field passes alone.
fn field_error(parser: &CronParser, expression: &str) -> Option<String> {
    let values: Vec<&str> = expression.split_whitespace().collect();
    let fields = &FIELDS[FIELDS.len() - values.len()..];
    values.iter().zip(fields).enumerate().find_map(|(i, (value, field))| {
        let mut probe = vec!["*"; values.len()];
        probe[i] = *value;
        parser.parse(&probe.join(" ")).err()?;
        let Field { name, min, max, names } = field;
        // The numbers it names (not the steps, after a '/'), one out of range being the likely mistake.
        let out_of_range = value
            .split(',')
            .flat_map(|item| item.split('/').next().unwrap_or_default().split('-'))
            .filter_map(|number| number.parse::<u32>().ok())
            .any(|number| number < *min || number > *max);
        Some(if out_of_range {
            format!("{name} '{value}' is out of range ({min}-{max})")
        } else {
            format!(
                "{name} '{value}' is not valid ({min}-{max}{names}: a number, a list 1,5, a range 1-5 or a step */5)"
            )
        })
    })
}

/// A parsed cron expression evaluated in an IANA time zone.
///
/// Five fields (minute precision) or six (seconds first), ranges, steps, lists, names (`MON`, `JAN`) and the
/// macros `@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`. Daylight-saving transitions follow the croner
/// crate: in a spring-forward gap a fixed-time job runs at the first valid time after the gap and interval jobs
/// skip the missing times; in a fall-back overlap a fixed-time job runs once and interval jobs run in both passes.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    cron: Cron,
    /// From the time zone database built in (jiff's copy of the IANA one), the same on every host: replicas agree on
    /// when an occurrence is whatever their system's own zone files say.
    zone: TimeZone,
}

impl CronSchedule {
    /// Parses `expression` for the zone named `timezone` (for example `Europe/Paris`, or `UTC`). An expression with
    /// a year field (croner reads a seventh one) is refused, as is one with no occurrence after `now`: it would
    /// never run. A refused field is named with its value (croner's own errors name neither).
    pub fn new(expression: &str, timezone: &str, now: DateTime<Utc>) -> Result<Self, SnatchError> {
        let trimmed = expression.trim();
        let invalid = |why: String| SnatchError::type_arg(format!("invalid cron expression '{expression}': {why}"));
        if trimmed.starts_with('@') {
            if !MACROS.iter().any(|known| known.eq_ignore_ascii_case(trimmed)) {
                return Err(invalid(format!("unknown macro '{trimmed}' (expected {})", MACROS.join(", "))));
            }
        } else {
            let fields = trimmed.split_whitespace().count();
            if !(5..=6).contains(&fields) {
                let year = if fields == 7 { " (a year field is not taken)" } else { "" };
                return Err(invalid(format!(
                    "5 or 6 fields (minute, hour, day of month, month, day of week; a second first when 6), got \
                     {fields}{year}"
                )));
            }
        }
        let parser = CronParser::builder().build();
        let cron = parser
            .parse(trimmed)
            .map_err(|e| invalid(field_error(&parser, trimmed).unwrap_or_else(|| e.to_string())))?;
        let zone = jiff::tz::db()
            .get(timezone)
            .map_err(|_| SnatchError::type_arg(format!("unknown time zone '{timezone}' (expected an IANA name)")))?;
        let schedule = Self { cron, zone };
        if schedule.next_after(now).is_none() {
            return Err(SnatchError::type_arg(format!(
                "cron expression '{expression}' has no occurrence after now: it would never run"
            )));
        }
        Ok(schedule)
    }

    /// The first occurrence strictly after `after`, if any.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_next_occurrence(&self.local(after)?, false).ok().and_then(utc)
    }

    /// The last occurrence strictly before `before`, if any.
    pub fn previous_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_previous_occurrence(&self.local(before)?, false).ok().and_then(utc)
    }

    /// `at` in the schedule's zone (none outside the years -9999 to 9999).
    fn local(&self, at: DateTime<Utc>) -> Option<Zoned> {
        let nanos = i32::try_from(at.timestamp_subsec_nanos()).ok()?;
        Some(Timestamp::new(at.timestamp(), nanos).ok()?.to_zoned(self.zone.clone()))
    }
}

/// `at` as a UTC instant.
fn utc(at: Zoned) -> Option<DateTime<Utc>> {
    let instant = at.timestamp();
    DateTime::from_timestamp(instant.as_second(), u32::try_from(instant.subsec_nanosecond()).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn five_and_six_fields_names_steps_and_macros() {
        let start = at("2026-01-05T10:00:30Z"); // a Monday
        let cases = [
            ("*/15 * * * *", "2026-01-05T10:15:00Z"),
            ("*/10 * * * * *", "2026-01-05T10:00:40Z"),
            ("0 12 * * MON-FRI", "2026-01-05T12:00:00Z"),
            ("0 0 1 FEB *", "2026-02-01T00:00:00Z"),
            ("5,7 10 * * *", "2026-01-05T10:05:00Z"),
            ("@hourly", "2026-01-05T11:00:00Z"),
            ("@daily", "2026-01-06T00:00:00Z"),
        ];
        for (expr, want) in cases {
            let s = CronSchedule::new(expr, "UTC", start).unwrap();
            assert_eq!(s.next_after(start), Some(at(want)), "{expr}");
        }
    }

    #[test]
    fn the_previous_occurrence_is_strictly_before() {
        let s = CronSchedule::new("*/15 * * * *", "UTC", Utc::now()).unwrap();
        assert_eq!(s.previous_before(at("2026-01-05T10:15:00Z")), Some(at("2026-01-05T10:00:00Z")));
        assert_eq!(s.previous_before(at("2026-01-05T10:15:01Z")), Some(at("2026-01-05T10:15:00Z")));
    }

    #[test]
    fn time_zones_shift_occurrences() {
        let s = CronSchedule::new("0 9 * * *", "America/New_York", Utc::now()).unwrap();
        assert_eq!(s.next_after(at("2026-01-05T00:00:00Z")), Some(at("2026-01-05T14:00:00Z")));
        assert_eq!(s.next_after(at("2026-07-05T00:00:00Z")), Some(at("2026-07-05T13:00:00Z")));
    }

    #[test]
    fn spring_forward_gap_runs_fixed_jobs_after_the_gap() {
        // Europe/Paris skips 02:00-03:00 on 2026-03-29.
        let s = CronSchedule::new("30 2 * * *", "Europe/Paris", Utc::now()).unwrap();
        let next = s.next_after(Utc.with_ymd_and_hms(2026, 3, 28, 23, 0, 0).unwrap()).unwrap();
        assert_eq!(next, at("2026-03-29T01:00:00Z"), "03:00 local, right after the gap");
    }

    #[test]
    fn fall_back_overlap_runs_fixed_jobs_once_and_interval_jobs_in_both_passes() {
        // America/New_York repeats 01:00-02:00 on 2026-11-01 (EDT, then EST).
        let fixed = CronSchedule::new("30 1 * * *", "America/New_York", Utc::now()).unwrap();
        let first = fixed.next_after(at("2026-11-01T04:00:00Z")).unwrap();
        assert_eq!(first, at("2026-11-01T05:30:00Z"), "01:30 EDT");
        assert_eq!(fixed.next_after(first), Some(at("2026-11-02T06:30:00Z")), "not 01:30 EST again that night");
        let interval = CronSchedule::new("*/30 * * * *", "America/New_York", Utc::now()).unwrap();
        let mut runs = vec![];
        let mut t = at("2026-11-01T04:50:00Z");
        for _ in 0..4 {
            t = interval.next_after(t).unwrap();
            runs.push(t);
        }
        let want = ["2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z"];
        assert_eq!(runs, want.map(at));
        assert_eq!(interval.previous_before(at("2026-11-01T06:00:00Z")), Some(at("2026-11-01T05:30:00Z")));
    }

    #[test]
    fn zones_are_the_iana_names_with_their_links_in_any_case() {
        let zones =
            ["UTC", "Europe/Paris", "Asia/Kolkata", "EST5EDT", "US/Eastern", "America/Argentina/ComodRivadavia"];
        for zone in zones.into_iter().chain(["utc", "europe/paris"]) {
            let s = CronSchedule::new("0 12 * * *", zone, Utc::now()).unwrap_or_else(|e| panic!("{zone}: {e}"));
            assert!(s.next_after(at("2026-06-01T00:00:00Z")).is_some(), "{zone}");
        }
        let kolkata = CronSchedule::new("0 12 * * *", "Asia/Kolkata", Utc::now()).unwrap();
        assert_eq!(kolkata.next_after(at("2026-06-01T00:00:00Z")), Some(at("2026-06-01T06:30:00Z")));
    }

    #[test]
    fn bad_expressions_and_zones_are_rejected() {
        for expr in ["", "* * *", "61 * * * *", "* * * * * * * *", "@sometimes"] {
            let err = CronSchedule::new(expr, "UTC", Utc::now()).unwrap_err();
            assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG", "{expr}");
        }
        let err = CronSchedule::new("* * * * *", "Mars/Olympus", Utc::now()).unwrap_err();
        assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
    }

    #[test]
    fn a_year_field_and_an_expression_that_never_runs_are_refused() {
        let now = at("2026-11-27T00:00:00Z");
        let year = CronSchedule::new("0 0 8 * * MON-FRI 2027", "UTC", now).unwrap_err().to_string();
        assert!(year.contains("got 7 (a year field is not taken)"), "{year}");
        for never in ["0 0 30 2 *", "0 0 31 4 *"] {
            let err = CronSchedule::new(never, "UTC", now).unwrap_err().to_string();
            assert!(err.contains("has no occurrence after now"), "{never}: {err}");
        }
    }

    #[test]
    fn a_refused_field_is_named_with_its_value() {
        let cases = [
            ("61 * * * *", "minute '61' is out of range (0-59)"),
            ("0 25 * * *", "hour '25' is out of range (0-23)"),
            ("* * 32 * *", "day of month '32' is out of range (1-31)"),
            ("* * * 13 *", "month '13' is out of range (1-12)"),
            ("* * * * 1-8", "day of week '1-8' is out of range (0-7)"),
            ("70 * * * * *", "second '70' is out of range (0-59)"),
            ("0 */5 5,99 * * *", "hour '5,99' is out of range (0-23)"),
            ("*/x * * * *", "minute '*/x' is not valid (0-59: a number, a list 1,5, a range 1-5 or a step */5)"),
            ("* * * FOO *", "month 'FOO' is not valid (1-12 or JAN-DEC: "),
            ("* * * * MO", "day of week 'MO' is not valid (0-7 (0 and 7: Sunday) or SUN-SAT: "),
        ];
        for (expr, want) in cases {
            let err = CronSchedule::new(expr, "UTC", Utc::now()).unwrap_err();
            assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG", "{expr}");
            let message = err.to_string();
            assert!(message.contains(&format!("invalid cron expression '{expr}': {want}")), "{expr}: {message}");
        }
    }

    #[test]
    fn a_wrong_number_of_fields_or_an_unknown_macro_says_what_is_taken() {
        for (expr, got) in [("* * *", 3), ("", 0), ("* * * * * * * *", 8)] {
            let message = CronSchedule::new(expr, "UTC", Utc::now()).unwrap_err().to_string();
            let want = format!(
                "5 or 6 fields (minute, hour, day of month, month, day of week; a second first when 6), got {got}"
            );
            assert!(message.contains(&want), "{expr}: {message}");
        }
        let message = CronSchedule::new("@sometimes", "UTC", Utc::now()).unwrap_err().to_string();
        assert!(
            message.ends_with(
                "unknown macro '@sometimes' (expected @yearly, @annually, @monthly, @weekly, @daily, @hourly)"
            ),
            "{message}"
        );
        assert!(CronSchedule::new("@Daily", "UTC", Utc::now()).is_ok());
    }
}
