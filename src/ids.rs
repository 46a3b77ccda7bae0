//! Identifiers of the store that are checked wherever they are read (the journal and the pack
//! indexes are untrusted input). The first of the newtypes issue 13 asks for lives here; the
//! others (node ids, handles, seqs, turns, epochs) are to follow.

/// Whether `id` is a blob id: a sha256 in lower-case hex (64 characters), as blob files, pack
/// index lines and journal records name blobs.
pub fn valid_blob_id(id: &str) -> bool {
    id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_are_lower_case_sha256_hex() {
        assert!(valid_blob_id(&"ab".repeat(32)));
        assert!(!valid_blob_id(&"AB".repeat(32)));
        assert!(!valid_blob_id("abc"));
        assert!(!valid_blob_id(&format!("{}/x", "a".repeat(62))));
    }
}
