//! A [`Timeline`] as a Chrome trace (the JSON object format with
//! `traceEvents` that chrome://tracing and ui.perfetto.dev load): one
//! process per pipeline stage, one thread per stream, "X" complete events
//! with `ts`/`dur` in microseconds, "M" metadata events naming them.

use serde_json::{json, Value};

use super::{Stream, Timeline};

/// Microseconds per second: the trace format's time unit.
const US_PER_S: f64 = 1e6;

/// Thread id of a stream (its drawing position, from 1).
fn tid(s: Stream) -> usize {
    Stream::ALL.iter().position(|x| *x == s).unwrap_or(0) + 1
}

/// The metadata events naming and ordering stage `stage`'s process and
/// the threads of `streams`.
fn metadata(t: &Timeline, stage: u64, streams: &[Stream]) -> Vec<Value> {
    let mut name = format!("stage {stage}");
    if stage == t.critical_stage {
        name.push_str(" (critical path)");
    }
    let mut out = vec![
        json!({"ph": "M", "name": "process_name", "pid": stage, "args": {"name": name}}),
        json!({"ph": "M", "name": "process_sort_index", "pid": stage, "args": {"sort_index": stage}}),
    ];
    for s in streams {
        out.push(json!({"ph": "M", "name": "thread_name", "pid": stage, "tid": tid(*s), "args": {"name": s.name()}}));
        out.push(json!({"ph": "M", "name": "thread_sort_index", "pid": stage, "tid": tid(*s), "args": {"sort_index": tid(*s)}}));
    }
    out
}

/// The trace of `t`.
pub fn chrome_trace(t: &Timeline) -> Value {
    let streams = t.streams();
    let mut ev: Vec<Value> = (0..t.stages)
        .flat_map(|st| metadata(t, st, &streams))
        .collect();
    ev.extend(t.events.iter().map(|e| {
        json!({
            "ph": "X",
            "name": e.name,
            "cat": e.kind,
            "pid": e.stage,
            "tid": tid(e.stream),
            "ts": e.start_s * US_PER_S,
            "dur": e.dur_s * US_PER_S,
            "args": {"critical_path": e.critical, "stream": e.stream.name()},
        })
    }));
    json!({
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {
            "model": t.model,
            "chip": t.chip,
            "chips": t.chips,
            "schedule": t.schedule,
            "stages": t.stages,
            "microbatches": t.microbatches,
            "virtual_stages": t.virtual_stages,
            "predicted_step_time_s": t.step_time_s,
            "critical_path_s": t.critical_path_s(),
            "critical_stage": t.critical_stage,
        },
    })
}
