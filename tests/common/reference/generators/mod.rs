//! The seeded generators of the model tests: steps made of selectors, resolved against the
//! tree just before they run so that most meet something that exists, and every shrunk list
//! stays meaningful. Each tier keeps the generator (weights, names, modes) it has always had,
//! so that a seed meets the same cases as before the tiers shared this module.

pub mod core_tier;
pub mod mounted_tier;
pub mod shell_tier;
