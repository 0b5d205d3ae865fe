//! The `parlab` command line: parses arguments and hands over to `parlab::cli`.

fn main() {
    std::process::exit(parlab::cli::main());
}
