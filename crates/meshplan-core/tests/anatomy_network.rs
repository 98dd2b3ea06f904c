//! Chip anatomy and network inventory (issue 24): each figure `hw show`
//! derives, called through meshplan and compared with a value derived by
//! hand from the catalog's figures (the derivation in the comment) or with
//! the book's printed answer within its rounding; and the issue-23 rough
//! edges of the network tables.

mod common;

use meshplan_core::hardware::report::{hw_report, hw_report_for, HwQuery, HwReport};
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::Catalog;

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

fn report(chip: &str) -> HwReport {
    hw_report(Catalog::builtin().chip(chip).unwrap(), &mut NoTrace)
}

fn with_mp(chip: &str, m: u64) -> HwReport {
    let q = HwQuery {
        model_parallel: Some(m),
    };
    hw_report_for(Catalog::builtin().chip(chip).unwrap(), &q, &mut NoTrace).unwrap()
}

/// ch12 Quiz 1 Q2: 132 SMs · 4 · 32 CUDA cores = 16,896; at 1.59 GHz
/// 16,896 · 1.59e9 = 26.86e12 ("26.9TFLOPs/s"), at the 1.98 GHz boost
/// 16,896 · 1.98e9 = 33.45e12 ("33.5 TFLOPs/s"); per SM 128 cores and
/// 67e12/2/132 = 253.8e9 (the published FP32 over 2 FLOPs per FMA).
#[test]
fn h100_vector_peaks_at_base_and_boost_clock() {
    let a = report("h100@book").anatomy;
    assert!(rel(a.vector_peak_base_flops_per_s.unwrap(), 16_896.0 * 1.59e9) < 1e-12);
    assert!(rel(a.vector_peak_base_flops_per_s.unwrap(), 26.9e12) < 0.002);
    assert!(rel(a.vector_peak_boost_flops_per_s.unwrap(), 16_896.0 * 1.98e9) < 1e-12);
    assert!(rel(a.vector_peak_boost_flops_per_s.unwrap(), 33.5e12) < 0.002);
    assert_eq!(a.vector_alus_per_core, Some(128));
    assert_eq!(a.cores_per_chip, Some(132));
    assert!(rel(a.vector_per_core_flops_per_s.unwrap(), 67e12 / 2.0 / 132.0) < 1e-12);
    // the clock the FP32 peak implies: 67e12 / (2 · 16,896) = 1.983 GHz
    assert!(rel(a.clock_from_fp32_hz.unwrap(), 67e12 / (2.0 * 16_896.0)) < 1e-12);
}

/// ch12 Quiz 1 Q6: a B200's 80 TFLOPS FP32 over 148·4·32 = 18,944 CUDA
/// cores at 2 FLOPs per FMA: 80e12 / 37,888 = 2.11 GHz ("2.1GHz"); the
/// footnote's 2250e12 / (148·4·1.86e9) = 2043 FLOPs per Tensor Core per
/// cycle ("about 2048").
#[test]
fn b200_clock_and_tensor_core_width() {
    let a = report("b200@book").anatomy;
    assert!(rel(a.clock_from_fp32_hz.unwrap(), 80e12 / 37_888.0) < 1e-12);
    assert!(rel(a.clock_from_fp32_hz.unwrap(), 2.1e9) < 0.01);
    let fpc = a.flops_per_cycle_per_matrix_unit.unwrap();
    assert!(rel(fpc, 2250e12 / (592.0 * 1.86e9)) < 1e-12);
    assert!(rel(fpc, 2048.0) < 0.005);
    // the vendor profile has no sourced clock: no per-cycle figure
    assert!(report("b200")
        .anatomy
        .flops_per_cycle_per_matrix_unit
        .is_none());
}

/// ch12 Quiz 1 Q5: 256 kB SMEM and 256 KiB of registers per SM over 132
/// SMs: 33.79 MB and 34.60 MB ("about 33MB ... of each ... about 66MB");
/// B200 adds 148 · 256 kB of TMEM.
#[test]
fn gpu_on_chip_memory_totals() {
    let a = report("h100@book").anatomy;
    assert!(rel(a.smem_total_bytes.unwrap(), 132.0 * 256e3) < 1e-12);
    assert!(rel(a.registers_total_bytes.unwrap(), 132.0 * 262_144.0) < 1e-12);
    let all = 132.0 * 256e3 + 132.0 * 262_144.0;
    assert!(rel(a.on_chip_memory_total_bytes.unwrap(), all) < 1e-12);
    assert!(
        rel(all, 66e6) < 0.04,
        "the book's 66 MB counts 256 kB twice"
    );
    let b = report("b200@book").anatomy;
    assert!(rel(b.tmem_total_bytes.unwrap(), 148.0 * 256e3) < 1e-12);
    assert!(
        rel(
            b.on_chip_memory_total_bytes.unwrap(),
            148.0 * (256e3 + 262_144.0 + 256e3)
        ) < 1e-12
    );
    // a TPU has no SMs: no SMEM total
    assert!(report("tpu-v5e").anatomy.smem_total_bytes.is_none());
}

/// Issue 23: "FLOPs per cycle per matrix unit 32786" beside a 128x128
/// array. A systolic array does one multiply-add per cell per cycle:
/// 2 · 128 · 128 = 32,768 whatever C and the clock say; the per-MXU and
/// per-core matmul rates are C / 4 and C / 1 on v5e (ch2: "about 5e13 bf16
/// FLOPs/s per MXU").
#[test]
fn mxu_flops_per_cycle_is_the_array_size() {
    for chip in ["tpu-v5e", "tpu-v5e@book", "tpu-v5p", "tpu-v4p"] {
        let a = report(chip).anatomy;
        assert_eq!(a.flops_per_cycle_per_matrix_unit, Some(32_768.0), "{chip}");
    }
    assert_eq!(
        report("tpu-v6e").anatomy.flops_per_cycle_per_matrix_unit,
        Some(2.0 * 256.0 * 256.0)
    );
    let a = report("tpu-v5e@book").anatomy;
    assert!(rel(a.matrix_per_unit_flops_per_s.unwrap(), 1.97e14 / 4.0) < 1e-12);
    assert!(rel(a.matrix_per_unit_flops_per_s.unwrap(), 5e13) < 0.02);
    assert!(rel(a.matrix_per_core_flops_per_s.unwrap(), 1.97e14) < 1e-12);
    // the text says "32768", not the quotient C/(units·clock) = 32,833
    let doc = meshplan_core::view::Render::doc(&report("tpu-v5e@book"));
    let text = meshplan_core::view::render_text(&doc);
    assert!(
        text.contains("FLOPs per cycle per matrix unit       32768"),
        "{text}"
    );
}

/// ch2: v5p's VPU is (8, 128) × 4 ALUs per core at 1.75 GHz: 4,096 ·
/// 1.75e9 = 7.168e12 per core; VMEM bandwidth ≈ 22 × W_hbm (ch2 Q4: v5e
/// 8.1e11 → 1.78e13; the @book profile's W_hbm is ch1's 8.2e11, so
/// 1.804e13), and a matmul from VMEM needs C / (22 · W_hbm) = 1.97e14 /
/// 1.804e13 = 10.92 ("an arithmetic intensity of only 10-20").
#[test]
fn tpu_vpu_per_core_and_vmem_bandwidth() {
    let a = report("tpu-v5p@book").anatomy;
    assert_eq!(a.vector_alus_per_core, Some(4096));
    assert!(rel(a.vector_per_core_flops_per_s.unwrap(), 4096.0 * 1.75e9) < 1e-12);
    // a TPU has one clock: no base/boost split
    assert!(a.vector_peak_boost_flops_per_s.is_none());
    let e = report("tpu-v5e@book").anatomy;
    assert!(rel(e.vmem_bandwidth_bytes_per_s.unwrap(), 22.0 * 8.2e11) < 1e-12);
    assert!(rel(e.vmem_bandwidth_bytes_per_s.unwrap(), 1.78e13) < 0.015);
    assert!(
        rel(
            e.critical_intensity_vmem.unwrap(),
            1.97e14 / (22.0 * 8.2e11)
        ) < 1e-12
    );
    assert!((10.0..=20.0).contains(&e.critical_intensity_vmem.unwrap()));
}

/// ch12 Quiz 2: an 8xH100 node puts 8 · 450e9 = 3.6 TB/s into NVLink; its
/// 4 NVSwitches × 64 ports × 25e9 = 6.4 TB/s could carry more, so the node
/// peaks at 3.6 TB/s; a 4|4 split carries 2 · 4 · 450e9 = 3.6 TB/s both
/// ways (Q2).
#[test]
fn h100_node_inventory() {
    let n = report("h100@book").network.unwrap();
    assert_eq!(n.gpus_per_node, 8);
    assert!(rel(n.node_nvlink_bandwidth_bytes_per_s, 8.0 * 450e9) < 1e-12);
    assert!(
        rel(
            n.node_nvswitch_bandwidth_bytes_per_s.unwrap(),
            4.0 * 64.0 * 25e9
        ) < 1e-12
    );
    assert!(rel(n.node_bandwidth_bytes_per_s, 3.6e12) < 1e-12);
    assert!(rel(n.node_bisection_bytes_per_s, 3.6e12) < 1e-12);
    assert!(rel(n.node_egress_bytes_per_s.unwrap(), 8.0 * 50e9) < 1e-12);
}

/// ch12 "Beyond the node level": the 1,024-GPU SuperPOD has 128 · 4 = 512
/// NVSwitches + 4 · 8 = 32 leaf + 16 spine = 560 switches; per SU the
/// nodes' cables carry 32 · 400e9 = 12.8 TB/s into 8 leaf switches of
/// 64 · 50e9 = 3.2 TB/s (25.6 TB/s); the spine takes 4 · 12.8 = 51.2 TB/s
/// into 16 · 3.2 = 51.2 TB/s; the bisection is 2 · 64 nodes · 400e9 =
/// 51.2 TB/s both ways.
#[test]
fn superpod_levels_and_aggregates() {
    let r = report("h100@book");
    let n = r.network.as_ref().unwrap();
    assert_eq!(n.switches_total, Some(560));
    assert_eq!((n.cluster_nodes, n.cluster_chips), (Some(128), Some(1024)));
    assert!(rel(n.cluster_bisection_bytes_per_s.unwrap(), 2.0 * 64.0 * 400e9) < 1e-12);
    let l = &r.network_levels;
    let cable: Vec<f64> = l
        .iter()
        .map(|x| x.cable_bandwidth_bytes_per_s.unwrap())
        .collect();
    let switch: Vec<f64> = l
        .iter()
        .map(|x| x.switch_bandwidth_bytes_per_s.unwrap())
        .collect();
    for (got, want) in cable.iter().zip([3.6e12, 12.8e12, 51.2e12]) {
        assert!(rel(*got, want) < 1e-12, "{got} vs {want}");
    }
    for (got, want) in switch.iter().zip([6.4e12, 25.6e12, 51.2e12]) {
        assert!(rel(*got, want) < 1e-12, "{got} vs {want}");
    }
}

/// ch12: the tree's AllGather bandwidth is min(8·450/7, 32·400/31,
/// 4·12.8e12/3) = 412.9 GB/s ("413GB/s"); an AllReduce without SHARP is
/// twice the time (206.5 GB/s); with SHARP T = V/W at every level, so
/// min(450, 400, 12,800) = 400 GB/s ("around 400GB/s").
#[test]
fn whole_tree_collective_bandwidths() {
    let r = report("h100@book");
    let n = r.network.unwrap();
    let ag = 32.0 * 400e9 / 31.0;
    assert!(rel(n.allgather_bandwidth_bytes_per_s, ag) < 1e-12);
    assert!(rel(n.allreduce_bandwidth_bytes_per_s, ag / 2.0) < 1e-12);
    assert!(rel(n.sharp_allreduce_bandwidth_bytes_per_s.unwrap(), 400e9) < 1e-12);
    let node = &r.network_levels[0];
    assert!(rel(node.sharp_allreduce_bandwidth_bytes_per_s.unwrap(), 450e9) < 1e-12);
    assert!(
        rel(
            node.allreduce_bandwidth_bytes_per_s,
            8.0 * 450e9 / 7.0 / 2.0
        ) < 1e-12
    );
    // NVSwitch gen 2 (A100) does not reduce in the network
    assert!(report("a100-80gb")
        .network
        .unwrap()
        .sharp_allreduce_bandwidth_bytes_per_s
        .is_none());
}

/// ch12 Quiz 5 Q2: with TP 8 × PP 8 each model-parallel group spans 8
/// nodes, so the DP reduction gets 8 · 400 = 3,200 GB/s and needs
/// 990e12 / 3.2e12 = 309 tokens per GPU; Megatron's 70B (16-way) gets 2 ·
/// 400 → 1,237.5; pure DP (M = 1) and node-sized groups (M = 8) stay at
/// W_node = 400 GB/s (2,475); DP inside one node without scale-out would
/// get W_gpu = 450 GB/s (2,200).
#[test]
fn dp_bandwidth_when_model_parallel_groups_span_nodes() {
    let dp = |m: u64| {
        let n = with_mp("h100@book", m).network.unwrap();
        (n.dp_bandwidth_bytes_per_s, n.dp_critical_batch_per_gpu)
    };
    let (w, b) = dp(64);
    assert!(rel(w, 8.0 * 400e9) < 1e-12);
    assert!(rel(b, 990e12 / 3.2e12) < 1e-12);
    assert!(rel(b, 309.0) < 0.002);
    assert!(rel(dp(16).1, 990e12 / 800e9) < 1e-12);
    for m in [1, 2, 8] {
        assert!(rel(dp(m).0, 400e9) < 1e-12, "M = {m}");
        assert!(rel(dp(m).1, 2475.0) < 1e-12, "M = {m}");
    }
    // the node level bounds very large groups: M = 128 → min(8 · 450e9,
    // 16 · 400e9) = 3.6 TB/s
    assert!(rel(dp(128).0, 3.6e12) < 1e-12);
}

/// Bad queries are clear errors: a group of 0 GPUs, or a model-parallel
/// group on a TPU.
#[test]
fn model_parallel_errors() {
    let cat = Catalog::builtin();
    let q0 = HwQuery {
        model_parallel: Some(0),
    };
    let e = hw_report_for(cat.chip("h100").unwrap(), &q0, &mut NoTrace).unwrap_err();
    assert!(e.to_string().contains("at least 1"), "{e}");
    let q = HwQuery {
        model_parallel: Some(8),
    };
    let e = hw_report_for(cat.chip("tpu-v5e").unwrap(), &q, &mut NoTrace).unwrap_err();
    assert!(e.to_string().contains("TPU"), "{e}");
}

/// Issue 23: no network level joins 0 or 1 children, and no level holds
/// more chips than its catalog limit: v4p's DCN would join one 4,096-chip
/// pod (dropped), v5p@book's one 8,960-chip pod (dropped), v6e's and the
/// GPUs' scale-out networks have no size ("any", AllGather → W).
#[test]
fn network_levels_have_two_or_more_children() {
    let cat = Catalog::builtin();
    for ch in cat.chips() {
        let r = hw_report(ch, &mut NoTrace);
        for l in &r.network_levels {
            if let Some(d) = l.children {
                assert!(d >= 2, "{}: {} has {d} children", ch.name, l.name);
            }
            if let (Some(c), Some(m)) = (l.chips, ch.scale_out.as_ref().and_then(|s| s.max_chips)) {
                assert!(
                    c <= m.max(ch.max_chips().unwrap_or(0)),
                    "{}: {}",
                    ch.name,
                    l.name
                );
            }
            assert!(l.allgather_bandwidth_bytes_per_s.is_finite(), "{}", ch.name);
        }
    }
    let names = |c: &str| -> Vec<String> {
        report(c)
            .network_levels
            .iter()
            .map(|l| l.name.clone())
            .collect()
    };
    assert_eq!(names("tpu-v4p"), ["ICI torus 16x16x16"]);
    assert_eq!(names("tpu-v5p@book"), ["ICI torus 16x20x28"]);
    // v5p: 18,432 Multislice chips = 3 whole 6,144-chip slices
    let v5p = report("tpu-v5p");
    let dcn = v5p.network_levels.last().unwrap();
    assert_eq!((dcn.children, dcn.chips), (Some(3), Some(18_432)));
    let v6e = report("tpu-v6e");
    let dcn = v6e.network_levels.last().unwrap();
    assert_eq!((dcn.children, dcn.chips), (None, None));
    assert_eq!(
        dcn.allgather_bandwidth_bytes_per_s,
        dcn.child_egress_bytes_per_s
    );
}

/// Every catalog chip's `source` names a public page (issue 23: no
/// `../shared/…` path, which a clone does not have).
#[test]
fn catalog_sources_are_public() {
    for ch in Catalog::builtin().chips() {
        assert!(!ch.source.contains("../"), "{}: {}", ch.name, ch.source);
        // a vendor page, or the book itself (H800: no datasheet reachable)
        assert!(
            ch.source.starts_with("https://") || ch.source.contains("How To Scale Your Model"),
            "{}: {}",
            ch.name,
            ch.source
        );
    }
}

/// No embedded catalog file (chips, models, efficiency profiles) names a
/// `../shared/…` path in its sources: a clone does not have one (issue 23).
#[test]
fn no_catalog_file_points_outside_the_clone() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    for dir in ["hardware", "models", "profiles", "engines"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(&p).unwrap();
                assert!(!text.contains("../shared"), "{}", p.display());
            }
        }
    }
}

/// `--explain`: every new figure is a recorded step in the book's symbols.
#[test]
fn explain_steps_in_book_symbols() {
    let mut rec = Recorder::default();
    let q = HwQuery {
        model_parallel: Some(64),
    };
    hw_report_for(Catalog::builtin().chip("h100@book").unwrap(), &q, &mut rec).unwrap();
    for (id, formula) in [
        ("hw.anatomy.vector_peak_base_flops_per_s", "N_cuda · f_base"),
        (
            "hw.anatomy.vector_peak_boost_flops_per_s",
            "N_cuda · f_boost",
        ),
        ("hw.anatomy.clock_from_fp32_hz", "C_fp32 / (2 · N_cuda)"),
        ("hw.anatomy.smem_total_bytes", "N_SM · SMEM_SM"),
        ("hw.anatomy.on_chip_memory_total_bytes", "SMEM + REG + TMEM"),
        ("hw.anatomy.matrix_per_core_flops_per_s", "C / N_SM"),
        (
            "hw.network.node_nvswitch_bandwidth_bytes_per_s",
            "N_switch · ports · W_port",
        ),
        (
            "hw.network.node_bisection_bytes_per_s",
            "2 · ⌊D_node/2⌋ · W_gpu",
        ),
        (
            "hw.network.sharp_allreduce_bandwidth_bytes_per_s",
            "min_i W_i",
        ),
        (
            "hw.network.dp_bandwidth_bytes_per_s",
            "min(W_gpu · min(M, D_node), W_node · max(M, D_node) / D_node)",
        ),
        ("hw.network.dp_critical_batch_per_gpu", "C / W_dp"),
    ] {
        let s = rec.find(id).unwrap_or_else(|| panic!("no step {id}"));
        assert_eq!(s.formula, formula, "{id}");
        assert!(s.value.is_finite() && s.source.is_some(), "{id}");
    }
    let dp = rec.find("hw.network.dp_critical_batch_per_gpu").unwrap();
    assert!(rel(dp.value, 309.375) < 1e-12);
    let mut rec = Recorder::default();
    hw_report(Catalog::builtin().chip("tpu-v5e@book").unwrap(), &mut rec);
    assert_eq!(
        rec.find("hw.anatomy.flops_per_cycle_per_matrix_unit")
            .unwrap()
            .formula,
        "2·m²"
    );
    assert_eq!(
        rec.find("hw.anatomy.vmem_bandwidth_bytes_per_s")
            .unwrap()
            .formula,
        "r_vmem · W_hbm"
    );
}

/// The claims files of these keys: every verdict (a formula regression
/// flips one), every FAIL an annotated book slip or approximation.
#[test]
fn book_claims_files() {
    use meshplan_core::check::{check, Verdict};
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (file, fails) in [
        (
            "examples/book/ch2-anatomy.toml",
            vec!["ch2-q4-vmem-bandwidth"],
        ),
        (
            "examples/book/ch12-anatomy.toml",
            vec![
                "ch12-q5-registers-total",
                "ch12-q5-on-chip-total",
                "ch12-tpu-vmem-bandwidth",
                "ch12-table-h100-smem-total",
                "ch12-table-h100-registers-total",
            ],
        ),
        (
            "examples/book/ch12-network.toml",
            vec![
                "ch12-appb-spine-switch-bandwidth",
                "ch12-appb-su-switch-bandwidth",
            ],
        ),
    ] {
        let f = common::claims_file(&root.join(file));
        let r = check(&f, Catalog::builtin(), true).unwrap_or_else(|e| panic!("{e}"));
        assert!(r.claims.len() >= 6, "{file}");
        for c in &r.claims {
            let want = if fails.contains(&c.id.as_str()) {
                Verdict::Fail
            } else {
                Verdict::Pass
            };
            assert_eq!(c.verdict, want, "{file}: {}", c.id);
            if c.verdict == Verdict::Fail {
                assert!(
                    c.note.as_deref().unwrap_or("").starts_with("BOOK "),
                    "{}",
                    c.id
                );
            }
        }
    }
}

/// Issue 23: "1 nodes" and, on a GPU cluster, "17409 chips (17409
/// exactly), slice 17409". One node is "1 node"; a GPU has no slices (no
/// `sizing.min_slice`), and the exact count keeps a decimal from 1,000 up
/// so it never repeats the rounded-up count.
#[test]
fn one_node_and_gpu_sizing_words() {
    use meshplan_core::check::eval::{evaluate, Args, Command};
    use meshplan_core::mesh::Topology;
    use meshplan_core::scenario::Scenario;
    let one = Topology::Gpu {
        nodes: 1,
        gpus_per_node: 8,
    };
    assert_eq!(one.describe(), "1 node x 8 GPUs");
    let two = Topology::Gpu {
        nodes: 2,
        gpus_per_node: 8,
    };
    assert_eq!(two.describe(), "2 nodes x 8 GPUs");
    let src = "[model]\nname = \"llama-3.1-70b\"\n[hardware]\nchip = \"h100\"\nchips = \"64\"\n[training]\nbatch_tokens = \"4M\"\nseq_len = 4096\n";
    let s = Scenario::parse(src, "gpu.toml").unwrap();
    let (v, _) = evaluate(Command::Train, &s, Catalog::builtin(), &Args::new(), false).unwrap();
    let sizing = &v["sizing"];
    assert!(sizing["min_slice"].is_null(), "{sizing}");
    // the memory-only count is ⌈bytes / HBM⌉ of the exact quotient
    let exact = sizing["min_chips_memory_exact"].as_f64().unwrap();
    assert_eq!(
        sizing["min_chips_memory"].as_u64().unwrap(),
        exact.ceil() as u64
    );
    // a TPU keeps its offered slice
    let tpu = src.replace(
        "chip = \"h100\"\nchips = \"64\"",
        "chip = \"tpu-v5p\"\nchips = \"64\"",
    );
    let s = Scenario::parse(&tpu, "tpu.toml").unwrap();
    let (v, _) = evaluate(Command::Train, &s, Catalog::builtin(), &Args::new(), false).unwrap();
    assert!(v["sizing"]["min_slice"].is_string(), "{}", v["sizing"]);
}

/// Issue 23 ("`--explain` prints = inf"): every step `hw show` records, for
/// every catalog chip, binds and yields finite numbers.
#[test]
fn explain_has_no_infinite_values() {
    for ch in Catalog::builtin().chips() {
        let mut rec = Recorder::default();
        let q = HwQuery {
            model_parallel: ch.nvlink.as_ref().map(|_| 16),
        };
        hw_report_for(ch, &q, &mut rec).unwrap();
        for s in rec.steps() {
            assert!(s.value.is_finite(), "{}: {} = {}", ch.name, s.id, s.value);
            for b in &s.bindings {
                assert!(
                    b.value.is_finite(),
                    "{}: {} binds {} = {}",
                    ch.name,
                    s.id,
                    b.symbol,
                    b.value
                );
            }
        }
    }
}
