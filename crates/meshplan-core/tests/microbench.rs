//! Calibration from microbenchmarks (issue 25 item 4): the sample files
//! under tests/fixtures/microbench/ are hand-written with known answers (the
//! formulas in each file's header comment), so every expectation below is
//! derived by hand from them, not read off meshplan.

use meshplan_core::fidelity::microbench::{calibrate, gemm, nccl, MicrobenchInputs};
use meshplan_core::fidelity::EfficiencyProfile;
use meshplan_core::hardware::Chip;
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::scenario::resolve_with;
use meshplan_core::units::DType;
use meshplan_core::Catalog;

fn fixture(name: &str) -> (String, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/microbench")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("fixture");
    (name.to_string(), text)
}

fn h100() -> &'static Chip {
    Catalog::builtin().chip("h100").expect("h100")
}

/// The profile `train` uses for the H100 without `--hw-profile`: where
/// `calibrate` starts.
fn start() -> EfficiencyProfile {
    meshplan_core::step::predict::active_profile(h100(), None)
        .expect("resolves")
        .expect("a profile")
        .profile
}

fn inputs(gemm: &[&str], attention: &[&str], logs: &[&str]) -> MicrobenchInputs {
    MicrobenchInputs {
        gemm: gemm.iter().map(|f| fixture(f)).collect(),
        attention: attention.iter().map(|f| fixture(f)).collect(),
        nccl: logs
            .iter()
            .map(|f| {
                let (n, t) = fixture(f);
                (n, t, None)
            })
            .collect(),
    }
}

fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        (got - want).abs() <= rel * want.abs().max(1e-30),
        "{what}: got {got}, want {want} (±{rel} relative)"
    );
}

/// gemm_half_peak.csv: every bf16 GEMM takes 2mnk / (0.5 × 989.5 TFLOP/s)
/// and all dimensions are multiples of 128 (no tile padding), so the form
/// e_max·x/(x + x½) is met exactly by e_max = 0.5, x½ = 0. Its fp8 rows
/// run at 0.4 of the 1,979 TFLOP/s fp8 peak and are reported, not used.
#[test]
fn gemm_sweep_at_half_peak_gives_matmul_efficiency_one_half() {
    let r = calibrate(h100(), &start(), &inputs(&["gemm_half_peak.csv"], &[], &[])).unwrap();
    close(r.profile.matmul_efficiency, 0.5, 1e-6, "matmul_efficiency");
    assert!(
        r.profile.matmul_half_dim < 0.01,
        "x½ {}",
        r.profile.matmul_half_dim
    );
    let fp8 = r
        .gemm_other_dtypes
        .iter()
        .find(|d| d.0 == "fp8")
        .expect("fp8 fit");
    close(fp8.1, 0.4, 1e-6, "fp8 e_max");
    let src = &r.profile.sources["matmul_efficiency"];
    assert!(src.starts_with("microbench: gemm_half_peak.csv"), "{src}");
    // only the GEMM fields change
    let fields: Vec<&str> = r.fitted.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["matmul_efficiency", "matmul_half_dim"]);
    assert_eq!(r.profile.attention_efficiency, start().attention_efficiency);
}

/// A sweep generated from e_max = 0.6, x½ = 128 in the pricer's form,
/// shapes with a smallest dimension from 16 to 8192 (most not multiples of
/// 128, so the tile padding x/⌈x⌉₁₂₈ acts): the fit recovers both, and the
/// fitted profile reproduces every row through the pricer's own
/// `gemm_efficiency`.
#[test]
fn gemm_fit_recovers_the_pricers_form() {
    let peak = 989.5e12;
    let form = |x: f64| 0.6 * (x / ((x / 128.0).ceil() * 128.0)) * x / (x + 128.0);
    let mut csv = String::from("m,n,k,time_s\n");
    let shapes = [
        (16.0, 4096.0, 4096.0),
        (100.0, 8192.0, 4096.0),
        (200.0, 4096.0, 14336.0),
        (4096.0, 300.0, 4096.0),
        (4096.0, 4096.0, 700.0),
        (1000.0, 1000.0, 1000.0),
        (2048.0, 6144.0, 4096.0),
        (8192.0, 8192.0, 8192.0),
    ];
    for (m, n, k) in shapes {
        let x: f64 = f64::min(m, f64::min(n, k));
        let t = 2.0 * m * n * k / (peak * form(x));
        csv += &format!("{m},{n},{k},{t:e}\n");
    }
    let pts = gemm::parse(&csv, "synthetic.csv", h100()).unwrap();
    let f = gemm::fit(&pts, DType::Bf16).unwrap();
    close(f.efficiency, 0.6, 1e-4, "e_max");
    close(f.half_dim, 128.0, 1e-3, "x½");
    let r = calibrate(
        h100(),
        &start(),
        &MicrobenchInputs {
            gemm: vec![("synthetic.csv".into(), csv.clone())],
            ..Default::default()
        },
    )
    .unwrap();
    for (m, n, k) in shapes {
        let x: f64 = f64::min(m, f64::min(n, k));
        // the pricer applies the framework's share of the kernel rate
        // (`matmul_stack_share`, which a kernel sweep does not measure)
        let e = meshplan_core::step::calibrated::gemm_efficiency(&r.profile, m, k, n)
            / r.profile.matmul_stack_share;
        close(e, form(x), 1e-3, &format!("pricer at {m}x{n}x{k}"));
    }
}

/// attention_35pct.csv: every forward kernel at 0.35 of the bf16 peak with
/// the pricer's FLOP count (4·b·s·h·d·keys_avg; causal keys_avg = keys −
/// seq/2, so the 1,024-query prefix row over 4,096 keys counts 3,584).
#[test]
fn attention_sweep_at_35_percent_gives_attention_efficiency() {
    let r = calibrate(
        h100(),
        &start(),
        &inputs(&[], &["attention_35pct.csv"], &[]),
    )
    .unwrap();
    close(
        r.profile.attention_efficiency,
        0.35,
        1e-6,
        "attention_efficiency",
    );
    assert_eq!(r.fitted.len(), 1);
}

/// One node: t = 7 × 3 µs + bus bytes / 360 GB/s for both logs (the bus
/// bytes 2·7/8·S all-reduce, 7/8·S all-gather), printed with nccl-tests'
/// 2-decimal µs: β/450 GB/s = 0.8 and 3 µs per ring step, within rounding.
#[test]
fn nccl_one_node_gives_intra_node_efficiency_and_latency() {
    let logs = ["nccl_all_reduce_1node.log", "nccl_all_gather_1node.log"];
    let r = calibrate(h100(), &start(), &inputs(&[], &[], &logs)).unwrap();
    close(
        r.profile.intra_node_efficiency,
        0.8,
        1e-4,
        "intra_node_efficiency",
    );
    close(
        r.profile.collective_latency_s,
        3e-6,
        1e-3,
        "collective_latency_s",
    );
    assert_eq!(r.collectives.len(), 2);
    for c in &r.collectives {
        assert_eq!((c.ranks, c.nodes), (8, 1), "{}", c.file);
        // 12 sizes (1 KiB to 4 GiB by 4), out-of-place and in-place
        assert_eq!(c.points, 24, "{}", c.file);
    }
    // nothing inter-node was measured
    assert_eq!(
        r.profile.inter_node_efficiency,
        start().inter_node_efficiency
    );
}

/// 2 and 4 nodes of 8 GPUs: β = 8 × 50 GB/s × 0.8 × k^−0.1, 6 µs per ring
/// step (15 and 31 steps): inter_node_efficiency 0.8 at one node,
/// congestion γ = 0.1, inter_node_latency_s 6 µs.
#[test]
fn nccl_multi_node_gives_inter_node_efficiency_congestion_and_latency() {
    let logs = ["nccl_all_reduce_2nodes.log", "nccl_all_reduce_4nodes.log"];
    let r = calibrate(h100(), &start(), &inputs(&[], &[], &logs)).unwrap();
    close(
        r.profile.inter_node_efficiency,
        0.8,
        1e-3,
        "inter_node_efficiency",
    );
    close(
        r.profile.inter_node_congestion,
        0.1,
        1e-2,
        "inter_node_congestion",
    );
    close(
        r.profile.inter_node_latency_s,
        6e-6,
        1e-3,
        "inter_node_latency_s",
    );
    let nodes: Vec<(u64, u64)> = r.collectives.iter().map(|c| (c.ranks, c.nodes)).collect();
    assert_eq!(nodes, [(16, 2), (32, 4)]);
}

/// The whole sample set, written as a profile and given to `train` as a
/// user profile: Llama-3.1-8B on 8 H100 (dp 8, 4,096-token sequences). The
/// built-in (InfiniBand) profile has the H100 GEMM curve e_max 0.8129 and
/// x½ = 17.5, the calibrated one 0.5 and x½ = 0 (both times the same
/// Megatron-Core matmul_stack_share), so each GEMM takes
/// 0.8129·x/(x + 17.5) / 0.5 = 1.6258·x/(x + 17.5) times longer — between
/// 1.6258 × 4096/4113.5 and 1.6258 for the smallest GEMM dimension
/// x ≥ 4,096 of this model at tp = 1; attention
/// takes 0.200007/0.35 of its time (the built-in attention_efficiency over
/// the sample's 0.35); the element-wise work (hbm_efficiency) is unchanged.
#[test]
fn a_calibrated_profile_changes_train_as_the_samples_say() {
    let all = inputs(
        &["gemm_half_peak.csv"],
        &["attention_35pct.csv"],
        &[
            "nccl_all_reduce_1node.log",
            "nccl_all_gather_1node.log",
            "nccl_all_reduce_2nodes.log",
            "nccl_all_reduce_4nodes.log",
        ],
    );
    let base = start();
    let r = calibrate(h100(), &base, &all).unwrap();
    let toml = r.profile.to_toml();
    // the written profile reads back as it was
    assert_eq!(
        EfficiencyProfile::parse(&toml, "cal.toml").unwrap(),
        r.profile
    );
    let body = "[model]\nname = \"llama-3.1-8b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n\
                [training]\nbatch_tokens = \"1Mi\"\nseq_len = 4096\n";
    let sc = Scenario::parse(body, "s.toml").unwrap();
    let cat = Catalog::builtin();
    let predict = |user: Option<(&str, &str)>| {
        let s = resolve_with(&sc, cat, user).unwrap();
        let r = s.analyze(&mut NoTrace);
        r.predicted.expect("a prediction").time_breakdown_s
    };
    let before = predict(None);
    let after = predict(Some((&toml, "cal.toml")));
    let mm = after.matmul / before.matmul;
    assert!(
        (1.6258 * 4096.0 / 4113.5 - 1e-9..=1.6258 + 1e-9).contains(&mm),
        "matmul ratio {mm}"
    );
    close(
        after.attention / before.attention,
        base.attention_efficiency / 0.35,
        1e-6,
        "attention ratio",
    );
    close(
        after.memory_bound,
        before.memory_bound,
        1e-12,
        "memory-bound",
    );
}

/// Bad files: a clear error at file:line (and the column where one is at fault).
#[test]
fn bad_microbenchmark_files_are_refused_at_their_line() {
    let chip = h100();
    let err = |g: &str, a: &str, n: &str| -> String {
        let mut i = MicrobenchInputs::default();
        if !g.is_empty() {
            i.gemm.push(("g.csv".into(), g.into()));
        }
        if !a.is_empty() {
            i.attention.push(("a.csv".into(), a.into()));
        }
        if !n.is_empty() {
            i.nccl.push(("n.log".into(), n.into(), None));
        }
        calibrate(chip, &start(), &i).unwrap_err().to_string()
    };
    let e = err(
        "m,n,k,time_us\n1024,1024,1024,5\n# c\n1024,x,1024,5\n",
        "",
        "",
    );
    assert!(
        e.contains("g.csv:4") && e.contains("`n`") && e.contains("bad number"),
        "{e}"
    );
    let e = err("m,n,k\n1,2,3\n", "", "");
    assert!(e.contains("g.csv:1") && e.contains("no time column"), "{e}");
    let e = err("m,n,k,dtype,time_us\n1024,1024,1024,fp4,5\n", "", "");
    assert!(e.contains("g.csv:2") && e.contains("no fp4 peak"), "{e}");
    let e = err("m,n,k,time_us\n1024,1024,1024,-5\n", "", "");
    assert!(e.contains("g.csv:2") && e.contains("> 0"), "{e}");
    // a time in ms under a µs column: 2·8192³ FLOPs in 1.5 µs is ~740× the peak
    let e = err("m,n,k,time_us\n8192,8192,8192,1.5\n", "", "");
    assert!(
        e.contains("g.csv:2") && e.contains("`time_us`") && e.contains("in its unit"),
        "{e}"
    );
    let e = err("m,n,k,dtype,time_us\n1024,1024,1024,fp8,5\n", "", "");
    assert!(e.contains("no bf16 rows"), "{e}");
    let e = err(
        "",
        "batch,seq,keys,heads,head_dim,causal,time_us\n1,4096,1024,32,128,1,100\n",
        "",
    );
    assert!(e.contains("a.csv:2") && e.contains("`keys`"), "{e}");
    let e = err("", "batch,seq,heads,head_dim,time_us\n1,2,3,4,5\n", "");
    assert!(e.contains("a.csv:1") && e.contains("causal"), "{e}");
    // nccl: no collective named, no rank lines, a short row
    let (_, good) = fixture("nccl_all_reduce_1node.log");
    let e = err("", "", &good.replace("all_reduce_perf", "some_test"));
    assert!(e.contains("n.log:1") && e.contains("KIND="), "{e}");
    let no_ranks: String = good
        .lines()
        .filter(|l| !l.contains("Rank"))
        .map(|l| format!("{l}\n"))
        .collect();
    let e = err("", "", &no_ranks);
    assert!(e.contains("n.log:1") && e.contains("Rank"), "{e}");
    let (line, _) = good
        .lines()
        .enumerate()
        .find(|(_, l)| l.trim_start().starts_with("65536"))
        .unwrap();
    let short: String = good
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == line {
                format!("{}\n", &l[..40])
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let e = err("", "", &short);
    assert!(
        e.contains(&format!("n.log:{}", line + 1)) && e.contains("columns"),
        "{e}"
    );
    assert!(err("", "", "").contains("no microbenchmark file"));
}

/// nccl-tests' older layout (no redop/root columns, `error` for `#wrong`)
/// and `N/A` in-place blocks (alltoall) parse; the collective comes from
/// the `KIND=` hint when the log does not name its program.
#[test]
fn nccl_layouts_and_kind_hint() {
    let log = "\
#  Rank  0 Group  0 Pid  1 on a device  0 [0x1] H100
#  Rank  1 Group  0 Pid  2 on a device  1 [0x2] H100
#       size         count    type   time   algbw   busbw  error     time   algbw   busbw  error
        1024           256   float   10.50    0.10    0.05  0e+00      N/A     N/A     N/A    N/A
     1048576        262144   float   15.00   69.91   34.95  0e+00      N/A     N/A     N/A    N/A
";
    let l = nccl::parse(log, "x.log", nccl::kind_of_name("alltoall")).unwrap();
    assert_eq!(l.kind, meshplan_core::collectives::Collective::AllToAll);
    assert_eq!((l.ranks, l.nodes, l.points.len()), (2, 1, 2));
    // t = α + (1/2)·S/β through (1024 B, 10.5 µs) and (1 MiB, 15 µs):
    // 1/β = (4.5 µs) / ((1048576 − 1024)/2 B), α = 10.5 µs − 512 B/β
    let f = nccl::fit(&l).unwrap();
    let inv_beta = 4.5e-6 / ((1048576.0 - 1024.0) / 2.0);
    close(f.busbw_bytes_per_s, 1.0 / inv_beta, 1e-9, "β");
    close(f.alpha_s, 10.5e-6 - 512.0 * inv_beta, 1e-9, "α");
    assert!(nccl::parse(log, "x.log", None).is_err());
    // else the file name says
    let by_name = nccl::parse(log, "runs/alltoall_2gpu.log", None).unwrap();
    assert_eq!(
        by_name.kind,
        meshplan_core::collectives::Collective::AllToAll
    );
    // a log of one test given as another, and a log of several tests
    let (_, ar) = fixture("nccl_all_reduce_1node.log");
    let e = nccl::parse(&ar, "ar.log", nccl::kind_of_name("all_gather")).unwrap_err();
    assert!(
        e.to_string().contains("ar.log:1") && e.to_string().contains("AllReduce"),
        "{e}"
    );
    let (_, ag) = fixture("nccl_all_gather_1node.log");
    let e = nccl::parse(&(ar + &ag), "both.log", None).unwrap_err();
    assert!(e.to_string().contains("several tests"), "{e}");
}

/// The samples derived from measured H100 tables (aiconfigurator systems
/// data, commit 095f58a: a subset of h100_sxm gemm_perf bf16 rows and the
/// 8-GPU nccl_perf all-reduce / all-gather rows, as nccl-tests tables).
/// Independent figures: the shared microbench README's check, bf16 8192³ =
/// 1.542 ms = 713 TFLOP/s = 0.72 of peak; the book (ch12, quoted in the
/// catalog's h100 notes): 8×H100 all-reduce bus bandwidth ~370 GB/s.
#[test]
fn samples_from_measured_h100_tables() {
    let r = calibrate(
        h100(),
        &start(),
        &inputs(
            &["gemm_h100_aic.csv"],
            &[],
            &[
                "nccl_all_reduce_h100_aic.log",
                "nccl_all_gather_h100_aic.log",
            ],
        ),
    )
    .unwrap();
    let (_, text) = fixture("gemm_h100_aic.csv");
    let pts = gemm::parse(&text, "gemm_h100_aic.csv", h100()).unwrap();
    let big = pts
        .iter()
        .find(|p| (p.m, p.n, p.k) == (8192.0, 8192.0, 8192.0))
        .unwrap();
    close(
        big.efficiency,
        2.0 * 8192f64.powi(3) / (1.542e-3 * 989.5e12),
        1e-3,
        "8192³",
    );
    // the fitted form prices the GEMMs a training step runs (every
    // dimension ≥ 4,096) within 5 % of their measured total time; row by
    // row it cannot do better than the data's own spread (0.70 to 0.92 of
    // peak among them: 4096³ 0.84, 8192³ 0.72, the clock drops under a
    // long GEMM)
    let large: Vec<&gemm::GemmPoint> = pts
        .iter()
        .filter(|p| p.m.min(p.n).min(p.k) >= 4096.0)
        .collect();
    let measured: f64 = large.iter().map(|p| p.time_s).sum();
    let priced: f64 = large
        .iter()
        .map(|p| {
            let e = meshplan_core::step::calibrated::gemm_efficiency(&r.profile, p.m, p.k, p.n)
                / r.profile.matmul_stack_share;
            2.0 * p.m * p.n * p.k / (989.5e12 * e)
        })
        .sum();
    close(priced, measured, 0.05, "time of the large GEMMs");
    let ar = r
        .collectives
        .iter()
        .find(|c| c.collective == "all-reduce")
        .unwrap();
    close(ar.busbw_gbs, 370.0, 0.05, "all-reduce bus bandwidth");
    assert!((1e-6..5e-6).contains(&r.profile.collective_latency_s));
}
