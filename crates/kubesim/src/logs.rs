//! Pod logs: the lines the simulated kubelet writes for each container (started with its image,
//! Ready, crashed and restarted, termination received, exited), kept per pod uid, and served
//! at `GET .../pods/NAME/log` with `container`, `previous`, `tailLines`, `timestamps` and
//! `follow`, the way `kubectl logs [-f] [--previous]` reads them.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::Notify;

/// One line, with the instant it was written (RFC 3339, nanoseconds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub at: String,
    pub text: String,
}

#[derive(Clone, Debug, Default)]
struct ContainerLog {
    current: Vec<Line>,
    /// The run before the last restart.
    previous: Option<Vec<Line>>,
    /// The current run has ended (the container exited and was not restarted).
    ended: bool,
}

/// Every pod's container logs, by pod uid and container name.
#[derive(Default)]
pub struct Logs {
    pods: Mutex<PodLogs>,
    /// Woken on every new line, for followers.
    written: Notify,
}

#[derive(Default)]
struct PodLogs {
    /// A pod's containers in a short list: a map's node would cost close to a kilobyte per pod
    /// for the one or two containers a pod has.
    by_uid: HashMap<String, Vec<(String, ContainerLog)>>,
    /// Pod count at which ended pods are next swept out. It doubles past the live pods after a
    /// sweep, so sweeping stays amortised O(1) per pod even when nothing has ended (a sweep at
    /// every new pod past the limit made loading N pods O(N²)).
    sweep_at: usize,
}

/// What a log request asks for.
#[derive(Clone, Debug, Default)]
pub struct LogRequest {
    pub container: String,
    pub previous: bool,
    pub tail_lines: Option<usize>,
    pub timestamps: bool,
}

/// A container's lines from `from` on, and whether its run is over.
pub struct Read {
    pub text: String,
    pub next: usize,
    pub ended: bool,
}

/// Lines kept per container run, and pods kept before ended ones are forgotten.
const MAX_LINES: usize = 1000;
const MAX_PODS: usize = 10_000;

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

impl Logs {
    fn with(&self, uid: &str, container: &str, change: impl FnOnce(&mut ContainerLog)) {
        let mut guard = self.pods.lock().unwrap_or_else(|p| p.into_inner());
        let pods = &mut *guard;
        if pods.by_uid.len() >= pods.sweep_at.max(MAX_PODS) && !pods.by_uid.contains_key(uid) {
            // A long-running simulator forgets the logs of pods whose containers all ended.
            pods.by_uid
                .retain(|_, containers| !containers.iter().all(|(_, c)| c.ended));
            pods.sweep_at = (pods.by_uid.len() * 2).max(MAX_PODS);
        }
        let containers = pods.by_uid.entry(uid.to_owned()).or_default();
        let index = match containers.iter().position(|(name, _)| name == container) {
            Some(index) => index,
            None => {
                containers.push((container.to_owned(), ContainerLog::default()));
                containers.len() - 1
            }
        };
        let log = &mut containers[index].1;
        change(log);
        let excess = log.current.len().saturating_sub(MAX_LINES);
        log.current.drain(..excess);
        drop(guard);
        self.written.notify_waiters();
    }

    /// Appends a line to a container's current run.
    pub fn write(&self, uid: &str, container: &str, text: impl Into<String>) {
        let line = Line {
            at: now(),
            text: text.into(),
        };
        self.with(uid, container, |log| log.current.push(line));
    }

    /// The container crashed and starts again: its run becomes the previous one.
    pub fn restart(&self, uid: &str, container: &str, first_line: impl Into<String>) {
        let line = Line {
            at: now(),
            text: first_line.into(),
        };
        self.with(uid, container, |log| {
            log.previous = Some(std::mem::replace(&mut log.current, vec![line]));
        });
    }

    /// The container exited for good: followers stop after its last line.
    pub fn end(&self, uid: &str, container: &str, last_line: impl Into<String>) {
        let line = Line {
            at: now(),
            text: last_line.into(),
        };
        self.with(uid, container, |log| {
            log.current.push(line);
            log.ended = true;
        });
    }

    /// Forgets a pod's logs (it is gone).
    pub fn forget(&self, uid: &str) {
        self.pods
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_uid
            .remove(uid);
        self.written.notify_waiters();
    }

    /// The lines asked for, from line `from` of the run on (the first read applies
    /// `tailLines`). Err: the request names no run there is.
    pub fn read(
        &self,
        uid: &str,
        request: &LogRequest,
        from: Option<usize>,
    ) -> Result<Read, String> {
        let pods = self.pods.lock().unwrap_or_else(|p| p.into_inner());
        let log = pods
            .by_uid
            .get(uid)
            .and_then(|containers| {
                containers
                    .iter()
                    .find(|(name, _)| *name == request.container)
            })
            .map(|(_, log)| log);
        let (lines, ended) = match (log, request.previous) {
            (Some(log), false) => (log.current.as_slice(), log.ended),
            (
                Some(ContainerLog {
                    previous: Some(previous),
                    ..
                }),
                true,
            ) => (previous.as_slice(), true),
            (_, true) => {
                return Err(format!(
                    "previous terminated container \"{}\" not found",
                    request.container
                ));
            }
            (None, false) => (&[][..], false),
        };
        let start = match (from, request.tail_lines) {
            (Some(from), _) => from.min(lines.len()),
            (None, Some(tail)) => lines.len().saturating_sub(tail),
            (None, None) => 0,
        };
        let mut text = String::new();
        for line in &lines[start..] {
            if request.timestamps {
                text.push_str(&line.at);
                text.push(' ');
            }
            text.push_str(&line.text);
            text.push('\n');
        }
        Ok(Read {
            text,
            next: lines.len(),
            ended,
        })
    }

    /// Resolves once a line is written (or a pod forgotten).
    pub async fn written(&self) {
        self.written.notified().await;
    }
}
