//! The `nodescope` binary: parses the command line and runs a subcommand.
//! Errors become one line on stderr and a non-zero exit code; but once
//! standard output was found closed by its reader (`| head -1`), whatever
//! the command became ends quietly with exit 0, as kubectl does
//! ([`cli::out`]).

use anyhow::Context;
use nodescope::cli::{self, Cli, Command};
use std::io::Write;
use std::process::ExitCode;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse_or_exit();
    let code = match run(cli) {
        Ok(code) => code,
        Err(error) => fail(format_args!("{error:#}"), 2),
    };
    if cli::out::closed() {
        return ExitCode::SUCCESS;
    }
    code
}

/// `message` on stderr with exit code `code`; nothing, when standard
/// output was closed by its reader (the error is then that, and no one's).
fn fail(message: impl std::fmt::Display, code: u8) -> ExitCode {
    if cli::out::closed() {
        return ExitCode::SUCCESS;
    }
    eprintln!("nodescope: {message}");
    ExitCode::from(code)
}

/// Runs an offline subcommand, which owns its exit codes: 0 and 1 from its
/// verdict, 2 for bad input, 3 for internal errors, panics included (one
/// line, no backtrace).
fn offline(
    run: impl FnOnce() -> Result<ExitCode, cli::dry_run::RunError> + std::panic::UnwindSafe,
) -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        if !cli::out::closed() {
            eprintln!("nodescope: internal error: {info}");
        }
    }));
    match std::panic::catch_unwind(run) {
        Ok(Ok(code)) => code,
        Ok(Err(error)) => fail(&error, error.exit_code()),
        // The hook said it.
        Err(_) if cli::out::closed() => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(3),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => {
            cli::init_logging(args.log_format, &args.log_level);
            let runtime = runtime()?;
            runtime.block_on(cli::run_serve(*args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Certs(args) => {
            let written = cli::run_certs(&args)?;
            cli::out::stdout()
                .write_all(written.as_bytes())
                .context("writing the output")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::DryRun(args) => Ok(offline(|| cli::run_dry_run(&args))),
        Command::Test(args) => Ok(offline(|| cli::run_test(&args))),
        Command::Features(args) => {
            if let Some(cli::features::FeaturesCommand::Controller(controller)) = &args.command {
                controller.logging.init();
                let runtime = runtime()?;
                runtime.block_on(async {
                    // Installed first: a SIGTERM (a pod deletion) must reach
                    // the release of the Lease, never the default action.
                    let mut sigterm = tokio::signal::unix::signal(
                        tokio::signal::unix::SignalKind::terminate(),
                    )
                    .context("installing the SIGTERM handler")?;
                    let connection = controller
                        .cluster
                        .connect(cli::cluster::Retry::Default)
                        .await?;
                    let client = connection.client.clone();
                    let lease = nodescope::leader::LeaseConfig {
                        namespace: controller.lease_namespace.clone(),
                        name: controller.lease_name.clone(),
                        duration: controller.lease_duration,
                    };
                    let metrics = nodescope::features::metrics::FeaturesMetrics::new(&lease.lease());
                    let listener = tokio::net::TcpListener::bind(controller.metrics_listen)
                        .await
                        .with_context(|| {
                            format!("cannot listen on {} (--metrics-listen)", controller.metrics_listen)
                        })?;
                    tracing::info!(addr = %controller.metrics_listen, "serving probes and metrics over plain HTTP");
                    let probes = tokio::spawn(nodescope::server::serve_plain(
                        listener,
                        nodescope::server::controller_router(
                            metrics.registry().clone(),
                            metrics.http.clone(),
                        ),
                        nodescope::server::ConnectionOptions::default(),
                        std::future::pending(),
                    ));
                    let config = nodescope::features::controller::ControllerConfig {
                        settle: controller.settle,
                        period: controller.period,
                        min_interval: controller.min_interval,
                        instance: controller.instance.clone(),
                        lease,
                        announce: controller.announce,
                    };
                    let shutdown = async move {
                        tokio::select! {
                            _ = sigterm.recv() => tracing::info!("SIGTERM received; shutting down"),
                            _ = tokio::signal::ctrl_c() => tracing::info!("interrupt received; shutting down"),
                        }
                    };
                    let result =
                        nodescope::features::controller::run(client, config, &metrics, shutdown)
                            .await;
                    probes.abort();
                    result
                        .map_err(|e| cli::cluster::explain(&e, &connection.target))
                        .context("features controller")?;
                    anyhow::Ok(())
                })?;
                return Ok(ExitCode::SUCCESS);
            }
            Ok(offline(|| cli::run_features(&args)))
        }
        Command::Update(args) => {
            if args.is_offline() {
                let mut out = cli::out::stdout();
                return Ok(match cli::update::run_offline(&args, &mut out) {
                    Ok(code) => code,
                    Err(error) => fail(format_args!("update: {error}"), 2),
                });
            }
            if !args.plan {
                args.logging.init();
            }
            let runtime = runtime()?;
            Ok(match runtime.block_on(cli::update::run_cluster(&args)) {
                Ok(code) => code,
                Err(error) => fail(format_args!("update: {error}"), 2),
            })
        }
        Command::Balloon(args) => {
            use cli::balloon::BalloonCommand;
            if let BalloonCommand::Status(status) = &args.command {
                let result = if status.store.starts_with("file:") {
                    cli::balloon::run_status_offline(status, &mut cli::out::stdout())
                } else {
                    runtime()?.block_on(cli::balloon::run_status_cluster(status))
                };
                return Ok(
                    result.unwrap_or_else(|error| fail(format_args!("balloon status: {error}"), 2))
                );
            }
            if let BalloonCommand::Controller(controller) = &args.command {
                controller.logging.init();
            }
            let runtime = runtime()?;
            Ok(match runtime.block_on(cli::balloon::run_cluster(&args)) {
                Ok(code) => code,
                Err(error) => fail(format_args!("balloon: {error}"), 2),
            })
        }
        Command::Version(args) => {
            cli::version::run_version(&args, &mut cli::out::stdout())
                .map_err(anyhow::Error::msg)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Completion(args) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            cli::version::run_completion(&args, &mut command, &mut cli::out::stdout())
                .map_err(anyhow::Error::msg)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Recommend(args) => {
            // Flags that contradict each other, before any file or cluster
            // is read, the same offline and against a cluster.
            if let Err(error) = args.upstream.check() {
                eprintln!("nodescope: recommend: {error}");
                return Ok(ExitCode::from(2));
            }
            if cli::recommend::is_offline(&args) {
                let mut out = cli::out::stdout();
                return Ok(match cli::recommend::run_offline(&args, &mut out) {
                    Ok(code) => code,
                    Err(error) => fail(error, 2),
                });
            }
            args.running.logging.init();
            let runtime = runtime()?;
            runtime
                .block_on(cli::recommend::run_cluster(&args))
                .context("recommend")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
