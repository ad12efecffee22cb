//! A component as a child process: started with its Deployment's
//! arguments, read through /proc (RSS, peak RSS, CPU) and its `/metrics`.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Running {
    pub child: Child,
    pub metrics_port: u16,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// Starts `args` (with `wrap`, e.g. heaptrack, in front when given; its
/// `{name}` replaced by the run's label), its output into `log`.
pub fn spawn(
    args: &[String],
    kubeconfig: &Path,
    name: &str,
    log: &Path,
    wrap: &[String],
    metrics_port: u16,
) -> Running {
    let binary = env!("CARGO_BIN_EXE_nodescope");
    // `{name}` in the wrapper's arguments: this run's label (the log's name).
    let label = log.file_stem().and_then(|s| s.to_str()).unwrap_or(name);
    let wrap: Vec<String> = wrap.iter().map(|w| w.replace("{name}", label)).collect();
    let mut command = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(binary);
            c
        }
        None => Command::new(binary),
    };
    let out = std::fs::File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let err = out.try_clone().unwrap_or_else(|e| panic!("{e}"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAME", name)
        .env("POD_NAMESPACE", "nodescope-system")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let child = command.spawn().unwrap_or_else(|e| panic!("{binary}: {e}"));
    Running {
        child,
        metrics_port,
    }
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn status_kib(&self, key: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// Resident memory now, in bytes.
    pub fn rss(&self) -> u64 {
        self.status_kib("VmRSS:") * 1024
    }

    /// Peak resident memory (VmHWM), in bytes.
    pub fn peak(&self) -> u64 {
        self.status_kib("VmHWM:") * 1024
    }

    /// User plus system CPU time so far, in seconds.
    pub fn cpu(&self) -> f64 {
        cpu_of(self.pid())
    }

    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// `GET path` on its metrics port: (status code, body).
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        let code = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_owned();
        Some((code, body))
    }

    pub fn stop(&mut self) {
        // Under a wrapper (heaptrack's script) the component is its child,
        // and so is heaptrack_interpret, which must not be signalled: it
        // writes the profile once the component's trace ends.
        let _ = Command::new("pkill")
            .args(["-TERM", "-P", &self.pid().to_string(), "-x", "nodescope"])
            .status();
        // SAFETY: signals our own child by its pid.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        for _ in 0..100 {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sum of every sample of metric family `name` in `text`.
pub fn metric_sum(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with(' ') || rest.starts_with('{')) {
            continue;
        }
        if let Some(v) = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

/// User plus system CPU time of process `pid` so far, in seconds.
pub fn cpu_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3, utime 14 and stime 15.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 / hz
}
