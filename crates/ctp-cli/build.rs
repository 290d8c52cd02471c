//! Embeds the shipped simulator scenarios (`scenarios/*.toml` at the workspace root), so
//! that `ctp sim NAME` works wherever ctp is run, not only from the repository.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut found: Vec<(String, String)> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .filter_map(|p| {
                    let name = p.file_stem()?.to_str()?.to_string();
                    let abs = p.canonicalize().ok()?;
                    Some((name, abs.to_str()?.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    let mut out = String::from(
        "/// The shipped scenarios, by name: (name, TOML source).\n\
         pub const SHIPPED: &[(&str, &str)] = &[\n",
    );
    for (name, path) in &found {
        println!("cargo:rerun-if-changed={path}");
        writeln!(out, "    ({name:?}, include_str!({path:?})),").unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("scenarios.rs");
    std::fs::write(dest, out).unwrap();
}
