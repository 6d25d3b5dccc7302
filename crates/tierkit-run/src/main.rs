//! `tierkit-run`: the same as `tierkit run` (docs/real-linux.md), without Python.
fn main() {
    std::process::exit(tierkit_run::main_with_args(std::env::args_os()));
}
