//! Writes the PTX of every kernel for one architecture into a folder (needs NVRTC only):
//! `cargo run -p bilstm-cuda --example dump_ptx -- 90 /tmp/ptx`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let arch: u32 = args.next().unwrap_or_else(|| "90".into()).parse()?;
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| ".".into()));
    std::fs::create_dir_all(&dir)?;
    for id in bilstm_kernels::ALL {
        let compiled = bilstm_cuda::compile_with_cache(id.kernel(), (arch / 10, arch % 10), None)?;
        let path = dir.join(format!("{}-compute_{arch}.ptx", id.name()));
        std::fs::write(&path, compiled.ptx.as_bytes())?;
        println!("{}", path.display());
    }
    Ok(())
}
