//! Every parameter of every profile file names its source (issue 14), and a
//! fitted parameter at a bound of its fit says why.

use meshplan_core::fidelity::profile::{EfficiencyProfile, Param};
use strum::IntoEnumIterator;

fn profiles() -> Vec<(String, EfficiencyProfile)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/profiles");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).expect("data/profiles") {
        let path = e.expect("entry").path();
        if path.extension().and_then(|x| x.to_str()) != Some("toml") {
            continue;
        }
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).expect("read");
        out.push((
            name.clone(),
            EfficiencyProfile::parse(&text, &name).expect("parses"),
        ));
    }
    assert!(out.len() >= 2, "profiles found: {}", out.len());
    out
}

/// Problems with one table of values and its sources.
fn check(
    what: &str,
    values: &[(String, f64)],
    sources: &std::collections::BTreeMap<String, String>,
    bad: &mut Vec<String>,
) {
    for (k, v) in values {
        let Some(src) = sources.get(k).filter(|s| !s.trim().is_empty()) else {
            bad.push(format!("{what}: `{k}` has no source"));
            continue;
        };
        let Some(q) = Param::from_name(k) else {
            continue;
        };
        let (lo, hi) = q.bounds();
        let at_bound = (v - lo).abs() <= 1e-4 * (hi - lo) || (hi - v).abs() <= 1e-4 * (hi - lo);
        let fitted = src.contains("fitted") && !src.contains("not fitted");
        if at_bound && fitted && !src.contains("bound") {
            bad.push(format!(
                "{what}: `{k}` = {v} is at a bound of its fit ({lo}, {hi}) without a note why"
            ));
        }
    }
}

#[test]
fn every_profile_parameter_has_a_source() {
    let mut bad = Vec::new();
    for (file, p) in profiles() {
        let all: Vec<(String, f64)> = Param::iter()
            .map(|q| (q.name().to_string(), p.param(q)))
            .collect();
        check(&file, &all, &p.sources, &mut bad);
        for (curve, v) in [
            ("measured_allreduce_gbs", &p.measured_allreduce_gbs),
            ("measured_allgather_gbs", &p.measured_allgather_gbs),
            ("measured_bw_nodes", &p.measured_bw_nodes),
        ] {
            if !v.is_empty() && !p.sources.contains_key(curve) {
                bad.push(format!("{file}: `{curve}` has no source"));
            }
        }
        for (net, n) in &p.networks {
            let vals: Vec<(String, f64)> = n.params.iter().map(|(k, v)| (k.clone(), *v)).collect();
            check(
                &format!("{file} [networks.{net}]"),
                &vals,
                &n.sources,
                &mut bad,
            );
        }
        for (name, c) in &p.clusters {
            let vals: Vec<(String, f64)> = c.params.iter().map(|(k, v)| (k.clone(), *v)).collect();
            check(
                &format!("{file} [clusters.{name}]"),
                &vals,
                &c.sources,
                &mut bad,
            );
            if !c.measured_bw_nodes.is_empty() {
                for curve in [
                    "measured_allreduce_gbs",
                    "measured_allgather_gbs",
                    "measured_bw_nodes",
                ] {
                    if !c.sources.contains_key(curve) {
                        bad.push(format!("{file} [clusters.{name}]: `{curve}` has no source"));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A parameter without a source is caught (the check can fail).
#[test]
fn a_missing_source_is_reported() {
    let (_, p) = profiles().remove(0);
    let mut sources = p.sources.clone();
    sources.remove("matmul_efficiency");
    let mut bad = Vec::new();
    check(
        "x",
        &[("matmul_efficiency".into(), 0.5)],
        &sources,
        &mut bad,
    );
    assert_eq!(bad.len(), 1, "{bad:?}");
    let mut bad = Vec::new();
    let s = [("matmul_efficiency".to_string(), "fitted on X".to_string())].into();
    check("x", &[("matmul_efficiency".into(), 0.9)], &s, &mut bad);
    assert_eq!(bad.len(), 1, "{bad:?}");
}
