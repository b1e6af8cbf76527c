//! Names the platforms where `linkme`'s distributed slices work, once: the code asks for
//! `cfg(breakerbox_linkme)` instead of repeating the list.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(breakerbox_linkme)");
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let linkme = matches!(
        os.as_str(),
        "linux"
            | "android"
            | "fuchsia"
            | "macos"
            | "ios"
            | "tvos"
            | "windows"
            | "illumos"
            | "freebsd"
            | "openbsd"
    );
    if linkme {
        println!("cargo::rustc-cfg=breakerbox_linkme");
    }
}
