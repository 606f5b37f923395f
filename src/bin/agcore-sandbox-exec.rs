//! `agcore-sandbox-exec --spec JSON -- COMMAND ARGS`: confines itself by the spec and then
//! executes the command (see `agcore::tools::sandbox`). Started by the library, not by hand.

fn main() -> std::process::ExitCode {
    agcore::tools::sandbox::exec_main(std::env::args_os().skip(1))
}
