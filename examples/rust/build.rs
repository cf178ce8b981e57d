// Links libkiln from an installed prefix: KILN_PREFIX, else the system's library path.
fn main() {
    println!("cargo:rerun-if-env-changed=KILN_PREFIX");
    if let Ok(prefix) = std::env::var("KILN_PREFIX") {
        for dir in ["lib", "lib64", "lib/x86_64-linux-gnu"] {
            println!("cargo:rustc-link-search=native={prefix}/{dir}");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{prefix}/{dir}");
        }
    }
    println!("cargo:rustc-link-lib=dylib=kiln");
}
