//! Links the `mekara` binary as a position-dependent executable on Linux.
//!
//! Claude Code runs `mekara hook ...` on every prompt, so start-up time is the hooks' whole
//! budget (≤ 3 ms). As a PIE, the dynamic loader applies ~60,000 relative relocations at each
//! start, writing to (and so faulting in) every page of pointers in the binary: 350 page
//! faults and ~2 ms, against ~160 faults and ~1 ms without. The cost is that the binary's own
//! code is not address-randomized (shared libraries still are); `benches/hooks.rs` measures it.
//!
//! Packagers whose policy requires PIE build with `MEKARA_PIE=1`: the default link, nothing
//! else changes.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MEKARA_PIE");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let pie = std::env::var("MEKARA_PIE").is_ok_and(|v| v == "1");
    if os == "linux" && env == "gnu" && !pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
