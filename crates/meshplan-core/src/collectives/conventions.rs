/*!
The book's approximations of a collective's cost, as explicit choices
(issue 24): a query that asks for one is costed under it and the report
shows meshplan's exact figure beside it, never silently.

* **Full bandwidth on every TPU axis.** The book often costs an axis as a
  full bidirectional ring, `T = V/W_ici`, where the slice has no
  wraparound link on that axis (a v5e axis shorter than 16, ch3 pop quiz
  2's first answer: 377 µs beside the 560 µs of the real 4-chip line).
* **The ring factor dropped.** On switched GPU levels and between slices
  the exact ring moves `V·(D−1)/D` through each egress; the book writes
  `≈ V/W` (ch12: "roughly 75us, or more precisely, 65us"; ch5's
  `8DF/(M·W_dcn)`). A wrapped TPU ring is already costed `V/W_ici` as in
  the book, so this changes GPU and DCN levels only.
*/

use serde::{Deserialize, Serialize};

use super::{AxisPlacement, TorusAxis};

/// Which of the book's approximations to cost under (both off = exact).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conventions {
    /// Every TPU torus axis a bidirectional ring, wraparound or not.
    pub full_bandwidth: bool,
    /// `V·(D−1)/D ≈ V` on GPU (NVLink, scale-out) and DCN levels.
    pub drop_ring_factor: bool,
}

impl Conventions {
    /// Whether any approximation is on.
    pub fn any(self) -> bool {
        self.full_bandwidth || self.drop_ring_factor
    }

    /// The approximations in words ("exact" when none).
    pub fn describe(self) -> String {
        let mut v = Vec::new();
        if self.full_bandwidth {
            v.push("book: full bandwidth (wraparound) on every TPU axis");
        }
        if self.drop_ring_factor {
            v.push("book: ring factor (D−1)/D dropped");
        }
        if v.is_empty() {
            "exact".into()
        } else {
            v.join("; ")
        }
    }
}

impl AxisPlacement {
    /// The same placement with every torus axis wrapped around (the book's
    /// full-bandwidth convention); other fabrics unchanged.
    pub fn with_full_bandwidth(&self) -> Self {
        match *self {
            AxisPlacement::Torus {
                mut axes,
                n_axes,
                link,
                hop_latency,
            } => {
                for a in axes[..n_axes].iter_mut() {
                    *a = TorusAxis {
                        size: a.size,
                        wraparound: true,
                    };
                }
                AxisPlacement::Torus {
                    axes,
                    n_axes,
                    link,
                    hop_latency,
                }
            }
            p => p,
        }
    }
}
