//! Links the `mekara` binary as a position-dependent executable on Linux.
//!
//! Claude Code runs `mekara hook ...` on every prompt, so start-up time is the hooks' whole
//! budget (≤ 3 ms). As a PIE, the dynamic loader applies ~60,000 relative relocations at each
//! start, writing to (and so faulting in) every page of pointers in the binary: 350 page
//! faults and ~2 ms, against ~160 faults and ~1 ms without. The cost is that the binary's own
//! code is not address-randomized (shared libraries still are); `benches/hooks.rs` measures it.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
