//! landfall
fn main() {}
