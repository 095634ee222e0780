//! Stamps the core with a hash of what it is built from (CORE_SOURCE_HASH): `src/*.rs`,
//! `Cargo.toml`, `Cargo.lock` and this file. The switch (storage_engine/native/__init__.py)
//! computes the same hash over the checkout's `native/`: a core built from anything older is
//! reported as stale and not used.
use std::{env, fs, path::Path};

/// The files hashed, in order: the crate's build inputs, then `src/*.rs` by name.
const BUILD_FILES: [&str; 3] = ["Cargo.toml", "Cargo.lock", "build.rs"];

fn fnv1a(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x100000001b3);
    }
}

fn main() {
    let root = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).to_path_buf();
    let mut sources: Vec<String> = fs::read_dir(root.join("src")).unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".rs"))
        .map(|n| format!("src/{n}"))
        .collect();
    sources.sort();
    let mut h: u64 = 0xcbf29ce484222325;
    for name in BUILD_FILES.iter().map(|s| s.to_string()).chain(sources) {
        fnv1a(&mut h, name.as_bytes());
        fnv1a(&mut h, &[0]);
        fnv1a(&mut h, &fs::read(root.join(&name)).unwrap());
        fnv1a(&mut h, &[0]);
        println!("cargo:rerun-if-changed={name}");
    }
    println!("cargo:rustc-env=CORE_SOURCE_HASH={h:016x}");
    println!("cargo:rerun-if-changed=src");
}
