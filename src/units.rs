//! Sizes as people read them.

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

#[cfg(test)]
mod tests {
    use super::human_size;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(200 << 20), "200.0 MiB");
        assert_eq!(human_size(2 << 30), "2.0 GiB");
        assert_eq!(human_size(u64::MAX), "16.0 EiB");
    }
}
