//! Theoretical transport coefficients, for validation and the run summary: the collision
//! rules' viscosities (SRD's among them, `rules::theory`) and the flows between walls
//! (`walls::theory`), in one namespace. Only re-exports: the formulas live beside their physics.

pub use super::rules::theory::*;
pub use super::walls::theory::*;
