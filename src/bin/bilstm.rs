//! The `bilstm` command line: `run`, `plan`, `bench`, `devices`. See `bilstm --help` and the
//! README's "Command line" section; the logic is in the library's hidden `cli` module.

use std::process::ExitCode;

fn main() -> ExitCode {
    bilstm::cli::main()
}
