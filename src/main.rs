//! The `nodescope` binary: parses the command line and runs a subcommand.
//! Errors become one line on stderr and a non-zero exit code.

use anyhow::Context;
use clap::Parser;
use nodescope::cli::{self, Cli, Command};
use std::process::ExitCode;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("nodescope: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => {
            cli::init_logging(args.log_format, &args.log_level);
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            runtime.block_on(cli::run_serve(*args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Certs(args) => {
            print!("{}", cli::run_certs(&args)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}
