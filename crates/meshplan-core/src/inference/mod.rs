//! Inference analysis (being built; see issue 4).
