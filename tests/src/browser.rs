//! [`Browser`]: Debian's headless Chromium driven over WebDriver
//! (`chromedriver` on a port it picks, `fantoccini` as the client), for
//! the console's tests. Each browser has a fresh profile and no network
//! beyond loopback. Dropped, it kills chromedriver's whole process group
//! — Chromium and its helpers with it (killed alone, the driver left them
//! running after the tests).

use std::io::BufRead as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::until;

/// Where Debian's packages put the browser and its driver.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A headless Chromium session.
#[derive(Debug)]
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    /// Where [`Browser::screenshot`] saves pictures.
    shots: PathBuf,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium (the packages
    /// `chromium` and `chromium-driver`; `.ci/run` installs them).
    /// Screenshots go to `shots`.
    pub async fn start(shots: &Path) -> Browser {
        for program in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(program).exists(),
                "{program} is missing: the console tests drive Debian's Chromium \
                 (apt-get install chromium chromium-driver)"
            );
        }
        let (driver, port) = start_driver();
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--disable-extensions",
                    "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a Chromium session");
        std::fs::create_dir_all(shots).expect("the screenshot directory");
        Browser {
            client,
            driver,
            _profile: profile,
            shots: shots.to_owned(),
        }
    }

    /// The process group of chromedriver and the browser it started.
    pub fn process_group(&self) -> u32 {
        self.driver.id()
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("the page loads");
    }

    /// The element `css` once it is on the page.
    pub async fn element(&self, css: &str) -> Element {
        until(&format!("{css} is on the page"), || async {
            self.client.find(Locator::Css(css)).await.ok()
        })
        .await
    }

    /// Whether `css` matches anything on the page now.
    pub async fn has(&self, css: &str) -> bool {
        !self
            .client
            .find_all(Locator::Css(css))
            .await
            .expect("the page answers")
            .is_empty()
    }

    /// Every element `css` matches now.
    pub async fn all(&self, css: &str) -> Vec<Element> {
        self.client
            .find_all(Locator::Css(css))
            .await
            .expect("the page answers")
    }

    /// The text of `css` once it satisfies `wanted`.
    pub async fn text_until(&self, css: &str, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        until(what, || async {
            let element = self.client.find(Locator::Css(css)).await.ok()?;
            let text = element.text().await.ok()?;
            wanted(&text).then_some(text)
        })
        .await
    }

    /// Clicks `css` once it is on the page; again if the page replaced
    /// it between finding and clicking (a page that refreshes itself,
    /// such as a running run's, renders anew every second).
    pub async fn click(&self, css: &str) {
        until(&format!("{css} is clicked"), || async {
            let element = self.client.find(Locator::Css(css)).await.ok()?;
            element.click().await.ok()
        })
        .await;
    }

    /// Replaces the value of the input `css` with `text`.
    pub async fn fill(&self, css: &str, text: &str) {
        let input = self.element(css).await;
        input.clear().await.expect("clearable");
        input.send_keys(text).await.expect("typeable");
    }

    /// Chooses `value` in the select `css`.
    pub async fn choose(&self, css: &str, value: &str) {
        self.element(css)
            .await
            .select_by_value(value)
            .await
            .expect("an option of that value");
    }

    /// Runs `script` in the page (its `arguments[0]` is `argument`); its
    /// return value.
    pub async fn script(&self, script: &str, argument: Value) -> Value {
        self.client
            .execute(script, vec![argument])
            .await
            .expect("the script runs")
    }

    /// Runs `script` whose last argument is a callback, and waits for it.
    pub async fn script_async(&self, script: &str, argument: Value) -> Value {
        self.client
            .execute_async(script, vec![argument])
            .await
            .expect("the script runs")
    }

    /// Saves the page as `NAME.png` for a person to look at; its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("the screenshot is written");
        path
    }
}

/// How many times [`start_driver`] starts chromedriver before giving up.
const DRIVER_ATTEMPTS: usize = 3;

/// Starts chromedriver on a port it picks; the child and that port.
///
/// A driver that exits before saying its port (seen once in CI, one
/// start in hundreds of runs, with nothing on stdout) is started again,
/// up to [`DRIVER_ATTEMPTS`] times; what it wrote to stderr and its exit
/// status are printed for each failed start, and in the panic if every
/// start fails.
fn start_driver() -> (Child, String) {
    let mut failures = Vec::new();
    for attempt in 1..=DRIVER_ATTEMPTS {
        match try_start_driver() {
            Ok(started) => return started,
            Err(failure) => {
                eprintln!("chromedriver start {attempt} of {DRIVER_ATTEMPTS} failed: {failure}");
                failures.push(failure);
            }
        }
    }
    panic!("chromedriver exited before saying its port, {DRIVER_ATTEMPTS} times: {failures:#?}");
}

/// One chromedriver start: the child and its port, or why it exited first.
fn try_start_driver() -> Result<(Child, String), String> {
    let mut driver = Command::new(CHROMEDRIVER)
        .arg("--port=0")
        // Its own process group, which the browsers it starts join.
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromedriver starts");
    let stderr = driver.stderr.take().expect("stderr is piped");
    // Drained for as long as the driver runs, so it never blocks on it.
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if text.len() < 4096 {
                text.push_str(&line);
                text.push('\n');
            }
        }
        text
    });
    let stdout = driver.stdout.take().expect("stdout is piped");
    let mut lines = std::io::BufReader::new(stdout).lines();
    let mut said = String::new();
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        if let Some(rest) = line.split("started successfully on port ").nth(1) {
            let port = rest.trim_end_matches('.').trim().to_owned();
            std::thread::spawn(move || for _ in lines {});
            return Ok((driver, port));
        }
        said.push_str(&line);
        said.push('\n');
    }
    let status = driver.wait().map_err(|error| error.to_string())?;
    let stderr = stderr_reader.join().unwrap_or_default();
    Err(format!("{status}; stdout: {said:?}; stderr: {stderr:?}"))
}

/// `kill -SIGNAL -- -GROUP`: whether some process of `group` got it.
fn signal_group(signal: &str, group: u32) -> bool {
    Command::new("kill")
        .args([&format!("-{signal}"), "--", &format!("-{group}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Whether any process of `group` is alive (`kill -0`).
pub fn process_group_alive(group: u32) -> bool {
    signal_group("0", group)
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !signal_group("KILL", self.process_group()) {
            let _ = self.driver.kill();
        }
        let _ = self.driver.wait();
    }
}
