//! Name matching for catalogs and choices: normalised comparison and
//! closest-name suggestions ("did you mean …?").

/// Normalise a name for matching: lowercase, `_`/space → `-`.
pub fn normalize(s: &str) -> String {
    let s: String = s
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c == '_' || c == ' ' { '-' } else { c })
        .collect();
    s.split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Like [`normalize`] but also drops separators and dots ("llama2-7b" ≈ "llama-2-7b").
pub(crate) fn loose(s: &str) -> String {
    normalize(s)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '@')
        .collect()
}

/// A word with case and every separator dropped, for matching spellings of
/// a keyword ("All-Gather", "all_gather" → "allgather"; "comms-bound" →
/// "commsbound").
pub(crate) fn squash(s: &str) -> String {
    s.trim()
        .to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// Closest names to `q` among `names`, best first (at most 3).
pub fn suggestions<'a>(q: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let q = loose(q);
    let mut scored: Vec<(f64, String)> = names
        .map(|n| {
            let l = loose(n);
            let mut s = strsim::jaro_winkler(&q, &l);
            if !q.is_empty() && (l.contains(&q) || q.contains(&l)) {
                s += 0.2;
            }
            (s, n.to_string())
        })
        .filter(|(s, _)| *s > 0.7)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, n)| n).collect()
}

/// Parse one of the enums of this module: case-insensitive, `_` taken as
/// `-`; the error lists the accepted names and suggests the closest.
pub fn parse_choice<E: std::str::FromStr + strum::VariantNames>(
    what: &str,
    s: &str,
) -> crate::error::Result<E> {
    let norm = s.trim().replace('_', "-");
    norm.parse().map_err(|_| {
        let near = crate::names::suggestions(&norm, E::VARIANTS.iter().copied());
        crate::error::Error::BadValue {
            what: what.into(),
            input: s.into(),
            expected: match near.first() {
                Some(n) => format!("one of {} (did you mean '{n}'?)", E::VARIANTS.join(", ")),
                None => format!("one of {}", E::VARIANTS.join(", ")),
            },
        }
    })
}
