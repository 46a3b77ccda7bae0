//! Sizes and times as people read them: binary units, and dates to the minute in the reader's
//! time zone (or UTC), with ISO 8601 for machines.

/// `bytes` in binary units with one decimal (`512 B`, `1.5 KiB`, `200.0 MiB`, `2.0 GiB`).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A moment as a calendar date and a time of day in one time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CivilTime {
    /// Year (proleptic Gregorian).
    pub year: i64,
    /// Month, 1 to 12.
    pub month: u32,
    /// Day of the month, 1 to 31.
    pub day: u32,
    /// Hour, 0 to 23.
    pub hour: u32,
    /// Minute, 0 to 59.
    pub minute: u32,
    /// Second, 0 to 60 (a leap second, from the C library).
    pub second: u32,
}

impl CivilTime {
    /// `unix` (seconds since the epoch) in UTC, computed here (days to a civil date by
    /// Howard Hinnant's `civil_from_days`), so it needs neither the C library nor a zone file.
    pub fn utc(unix: i64) -> Self {
        let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        Self {
            year,
            month: month as u32,
            day: day as u32,
            hour: (secs / 3600) as u32,
            minute: (secs % 3600 / 60) as u32,
            second: (secs % 60) as u32,
        }
    }

    /// `unix` in the local time zone (`TZ`, else `/etc/localtime`); UTC if the C library
    /// cannot say.
    pub fn local(unix: i64) -> Self {
        match crate::sys::local_time(unix) {
            Ok(tm) => Self {
                year: i64::from(tm.tm_year) + 1900,
                month: (tm.tm_mon + 1) as u32,
                day: tm.tm_mday as u32,
                hour: tm.tm_hour as u32,
                minute: tm.tm_min as u32,
                second: tm.tm_sec as u32,
            },
            Err(_) => Self::utc(unix),
        }
    }

    /// The date and the time to the minute: `2026-12-02 09:14`.
    pub fn to_minute(&self) -> String {
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute
        )
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's `days_from_civil`); `None` for a
/// day the month does not have.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> Option<i64> {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let len = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day == 0 || day > len {
        return None;
    }
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// `unix` (seconds since the epoch) as ISO 8601 in UTC: `2026-12-02T09:14:05Z`.
pub fn iso8601_utc(unix: i64) -> String {
    let t = CivilTime::utc(unix);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// Seconds since the epoch as the journal keeps them (`u64`), as the C library takes them.
pub fn unix_seconds(time: u64) -> i64 {
    i64::try_from(time).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::{CivilTime, human_size, iso8601_utc};

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(4096), "4.0 KiB");
        assert_eq!(human_size(200 << 20), "200.0 MiB");
        assert_eq!(human_size(2 << 30), "2.0 GiB");
        assert_eq!(human_size(1536 << 20), "1.5 GiB");
        assert_eq!(human_size(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn utc_dates_match_the_calendar() {
        // Values from `date -u -d @N`.
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601_utc(1_798_882_445), "2027-01-02T09:34:05Z");
        assert_eq!(iso8601_utc(1_796_202_059), "2026-12-02T09:00:59Z");
        assert_eq!(iso8601_utc(-1), "1969-12-31T23:59:59Z");
        assert_eq!(
            CivilTime::utc(4_102_444_799).to_minute(),
            "2099-12-31 23:59"
        );
    }
}
