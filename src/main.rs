use clap::Parser;

fn main() {
    std::process::exit(trainplan::cli::run(trainplan::cli::Cli::parse()));
}
