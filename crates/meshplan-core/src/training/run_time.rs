//! What one step time means for the whole run: tokens per second, and with
//! a token budget the training time, chip-hours and cost. The roofline
//! report and the calibrated prediction both quote these, each at its own
//! step time.

use crate::hardware::Chip;
use crate::parallelism::TrainConfig;

/// Throughput and the training run's time, chip-hours and cost at one step time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RunTime {
    /// B / step time (0 when the step takes no time).
    pub tokens_per_s: f64,
    /// `train_tokens` / tokens per second, seconds.
    pub train_time_s: Option<f64>,
    /// Training time × chips, hours.
    pub chip_hours: Option<f64>,
    /// Chip-hours × the chip's price.
    pub cost_usd: Option<f64>,
}

impl RunTime {
    /// `cfg`'s batch and token budget on `chips` chips of `chip` at `step_s` per step.
    pub(crate) fn at_step(step_s: f64, cfg: &TrainConfig, chips: f64, chip: &Chip) -> RunTime {
        let tokens_per_s = if step_s > 0.0 {
            cfg.batch_tokens as f64 / step_s
        } else {
            0.0
        };
        let train_time_s = cfg
            .train_tokens
            .filter(|_| tokens_per_s > 0.0)
            .map(|t| t as f64 / tokens_per_s);
        let chip_hours = train_time_s.map(|t| t * chips / 3600.0);
        RunTime {
            tokens_per_s,
            train_time_s,
            chip_hours,
            cost_usd: chip_hours.and_then(|h| chip.usd_per_chip_hour.map(|u| h * u)),
        }
    }
}
