//! `agentforge report --html` through the binary, looked at in a real browser: headless
//! Chromium loads the page from disk (no network), its DOM must hold the timeline rows,
//! the plot's points, the loop warning, the checks and the diff, with the model's markup
//! shown as text; its screenshot must be a real picture of the page.
//!
//! Chromium is Debian's `chromium` (`.ci/run` installs it). Outside CI a machine without
//! it skips the test, saying so; under `CI=true` a missing Chromium fails it.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::json;

/// The looping run of `e2e.rs`: a failing edit repeated until warned and blocked, a
/// change of approach, and an end whose summary holds markup.
fn session() -> String {
    let bad =
        json!({"path": "notes.txt", "old_text": "status: brokn", "new_text": "status: fixed"});
    let mut lines = vec![
        json!({"tool": "run_tests", "arguments": {}, "usage": {"input_tokens": 1500, "output_tokens": 20}}),
    ];
    for i in 0..4 {
        lines.push(json!({"tool": "edit_file", "arguments": bad, "usage": {"input_tokens": 1510 + i * 10, "output_tokens": 30}}));
    }
    lines.push(json!({"tool": "replace_lines", "arguments": {"path": "notes.txt", "start_line": 2, "end_line": 2, "new_content": "status: fixed"}, "usage": {"input_tokens": 1550, "output_tokens": 40}}));
    lines.push(json!({"tool": "complete", "arguments": {"summary": "done <script>alert('x')</script><img src=x onerror=alert(1)>"}, "usage": {"input_tokens": 1560, "output_tokens": 25}}));
    lines
        .iter()
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each step's cost in micro-dollars at the replayed model's shipped price
/// (`claude-sonnet-4-5`: $3 in / $15 out per million tokens, 3 and 15 micro-dollars a
/// token), from the usage [`session`] reports.
fn step_costs() -> Vec<u64> {
    session()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["usage"]["input_tokens"].as_u64().unwrap() * 3
                + v["usage"]["output_tokens"].as_u64().unwrap() * 15
        })
        .collect()
}

/// Micro-dollars as the host shows them: every significant digit, at least cents.
fn dollars(micros: u64) -> String {
    let frac = format!("{:06}", micros % 1_000_000);
    let digits = frac.trim_end_matches('0');
    let digits = if digits.len() < 2 { &frac[..2] } else { digits };
    format!("${}.{digits}", micros / 1_000_000)
}

/// The texts of the timeline's cost cells, in step order.
fn cost_cells(html: &str) -> Vec<String> {
    regex::Regex::new(r#"<td class="num cost[^"]*">([^<]*)</td>"#)
        .unwrap()
        .captures_iter(html)
        .map(|c| c[1].to_string())
        .collect()
}

/// The task's cost, as its card shows it.
fn cost_card(html: &str) -> String {
    let card = &html[html.find("id=\"cost\"").expect("a cost card")..];
    regex::Regex::new(r"<b[^>]*>([^<]*)</b>")
        .unwrap()
        .captures(card)
        .unwrap()[1]
        .to_string()
}

/// The Chromium to use, or why there is none.
fn chromium() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("AGENTFORGE_CHROMIUM") {
        let p = PathBuf::from(p);
        return match p.is_file() {
            true => Ok(p),
            false => Err(format!("AGENTFORGE_CHROMIUM={} is no file", p.display())),
        };
    }
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).is_file() {
            return Ok(PathBuf::from(p));
        }
    }
    Err(
        "no /usr/bin/chromium (install Debian's `chromium` package, or set AGENTFORGE_CHROMIUM)"
            .into(),
    )
}

/// Runs Chromium headless on `args` with a fresh profile, killed after 90 s.
fn headless(browser: &Path, profile: &Path, args: &[String]) -> Output {
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args);
    support::output_within(&mut cmd, Duration::from_secs(90)).0
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR", "IHDR first");
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let dir = support::notes::notes_workspace(&support::notes::notes_task(
        "notes",
        support::notes::FIXED,
        12,
    ));
    let ws = dir.path();
    std::fs::write(ws.join("session.jsonl"), session()).unwrap();
    let out = support::notes::agentforge(ws)
        .args(["run", "task.yaml", "--replay", "session.jsonl", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = ws.join("report.html");
    let out = support::notes::agentforge(ws)
        .args(["report", "notes", "--html", "report.html"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Self-contained: no script, nothing fetched, the model's markup escaped.
    let html = std::fs::read_to_string(&page).unwrap();
    for forbidden in ["<script", "@import", "url(", "<link", "<iframe", "<img"] {
        assert!(!html.contains(forbidden), "`{forbidden}` in the page");
    }
    // No element loads anything (an escaped `&lt;img src=...` in the text is no element).
    let loads = regex::Regex::new(r"<[a-zA-Z][^>]*\s(src|href|srcset|action)\s*=").unwrap();
    assert!(!loads.is_match(&html), "{:?}", loads.find(&html));
    assert!(html.contains("&lt;script&gt;alert("), "escaped markup");
    // Each step's cost and the task's, from the reported usage at the model's price.
    let costs = step_costs();
    let expected: Vec<String> = costs.iter().map(|&c| dollars(c)).collect();
    assert_eq!(cost_cells(&html), expected);
    assert_eq!(cost_card(&html), dollars(costs.iter().sum()));

    let browser = match chromium() {
        Ok(b) => b,
        Err(why) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("skipped: {why}; not in CI, so the page is not rendered");
            return;
        }
        Err(why) => panic!("CI=true and {why}: .ci/run installs it"),
    };
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}", page.display());
    let out = headless(
        &browser,
        profile.path(),
        &["--dump-dom".to_string(), url.clone()],
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        dom.contains("<section id=\"timeline\">"),
        "no page in the DOM; chromium said: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The timeline: one row per step, results as recorded.
    assert_eq!(dom.matches("<tr class=\"step\"").count(), 7, "{dom}");
    assert!(
        dom.contains("id=\"step-5\" data-result=\"skipped\""),
        "{dom}"
    );
    assert!(
        dom.contains("id=\"step-7\" data-result=\"success\""),
        "{dom}"
    );
    // The plot: one point per step, inside the SVG.
    let svg = &dom[dom.find("<svg").expect("an svg")..dom.find("</svg>").expect("svg ends")];
    assert_eq!(svg.matches("<circle class=\"pt\"").count(), 7, "{svg}");
    assert!(svg.contains("<polyline class=\"series\""), "{svg}");
    // Loop warning, checks over time, the diff.
    assert!(dom.contains("<tr class=\"loop-warning\">"), "{dom}");
    assert!(dom.contains("identical_action"), "{dom}");
    assert!(dom.contains("<tr class=\"check-row\">"), "{dom}");
    assert!(
        dom.contains("cell cell-fail") && dom.contains("cell cell-pass"),
        "{dom}"
    );
    assert!(
        dom.contains("<div class=\"file\" data-path=\"notes.txt\">"),
        "{dom}"
    );
    assert!(
        dom.contains("<span class=\"del\">-status: broken</span>"),
        "{dom}"
    );
    assert!(
        dom.contains("<span class=\"add\">+status: fixed</span>"),
        "{dom}"
    );
    // The cost of each step in its row, the task's in its card, as rendered.
    assert_eq!(cost_cells(&dom), expected, "{dom}");
    assert_eq!(cost_card(&dom), dollars(costs.iter().sum()), "{dom}");
    assert!(dom.contains("<th class=\"num\">Cost</th>"), "{dom}");
    // The model's markup is text in the page, never an element.
    assert!(!dom.contains("<script"), "a script element in the DOM");
    assert!(!dom.contains("<img"), "an img element in the DOM");
    assert!(
        dom.contains("&lt;script&gt;alert('x')&lt;/script&gt;"),
        "{dom}"
    );

    let shot = profile.path().join("report.png");
    let out = headless(
        &browser,
        profile.path(),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2000".to_string(),
            url,
        ],
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}); chromium said: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(png_size(&png), (1280, 2000));
    // A blank page of that size compresses to a few KB; this one has tables, a plot, a diff.
    assert!(png.len() > 40_000, "screenshot of {} bytes", png.len());
    if let Some(keep) = std::env::var_os("AGENTFORGE_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

#[test]
fn the_html_report_says_unknown_for_a_cost_nobody_priced_never_zero() {
    let dir = support::notes::notes_workspace(&support::notes::notes_task(
        "notes",
        support::notes::FIXED,
        12,
    ));
    let ws = dir.path();
    // The same run recorded without usage: priced model, but no tokens to price.
    let unpriced: Vec<String> = session()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("usage");
            v.to_string()
        })
        .collect();
    std::fs::write(ws.join("session.jsonl"), unpriced.join("\n")).unwrap();
    let out = support::notes::agentforge(ws)
        .args(["run", "task.yaml", "--replay", "session.jsonl", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = support::notes::agentforge(ws)
        .args(["report", "notes", "--html", "report.html"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let html = std::fs::read_to_string(ws.join("report.html")).unwrap();
    assert_eq!(cost_cells(&html), vec!["unknown".to_string(); 7]);
    assert_eq!(cost_card(&html), "unknown (7 unpriced steps)");
    assert!(html.contains("id=\"cost\" data-known=\"false\""), "{html}");
    assert!(!html.contains("$0.00"), "a zero cost in the page");
}
