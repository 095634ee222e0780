//! Stamps the core with a hash of its own sources (CORE_SOURCE_HASH), which the switch
//! (storage_engine/native/__init__.py) compares with the checkout's `native/src`: a core built
//! from older sources is reported as stale and not used.
use std::{env, fs, path::Path};

fn fnv1a(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x100000001b3);
    }
}

fn main() {
    let src = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("src");
    let mut names: Vec<_> = fs::read_dir(&src).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".rs")).collect();
    names.sort();
    let mut h: u64 = 0xcbf29ce484222325;
    for n in &names {
        fnv1a(&mut h, n.as_bytes());
        fnv1a(&mut h, &[0]);
        fnv1a(&mut h, &fs::read(src.join(n)).unwrap());
        fnv1a(&mut h, &[0]);
    }
    println!("cargo:rustc-env=CORE_SOURCE_HASH={h:016x}");
    println!("cargo:rerun-if-changed=src");
}
