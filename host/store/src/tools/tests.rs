//! Tests of the file actions and snapshots through the public API.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::PathBuf;

use agentforge_core::actions::parse_action;

use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    ws: Workspace,
    snaps: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("src")).unwrap();
        fs::write(
            root.join("src/lib.rs"),
            "fn alpha() {\n    let x = 1;\n    x + 1\n}\n\nfn beta() {\n    let x = 1;\n}\n",
        )
        .unwrap();
        fs::write(root.join("README.md"), "# Demo\nalpha and beta\n").unwrap();
        fs::create_dir_all(root.join(".agentforge")).unwrap();
        fs::write(root.join(".agentforge/state.yaml"), "alpha: secret\n").unwrap();
        let ws = Workspace::new(root).unwrap();
        Fixture {
            _dir: dir,
            ws,
            snaps: tempfile::tempdir().unwrap(),
        }
    }

    fn snap(&self, name: &str) -> PathBuf {
        self.snaps.path().join(name)
    }

    fn run(&self, action: Action) -> FileOutcome {
        execute_file_action(&self.ws, &action, &self.snap("step"))
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.ws.root().join(rel)
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap()
    }
}

fn parsed(name: &str, args: serde_json::Value) -> Action {
    parse_action(name, &args).unwrap()
}

fn assert_failure(outcome: &FileOutcome, needle: &str) {
    assert_eq!(outcome.result, ActionResult::Failure, "{outcome:?}");
    let error = outcome.error.as_deref().unwrap_or("");
    assert!(
        error.contains(needle),
        "error lacks `{needle}`: {outcome:#?}"
    );
    assert!(outcome.files_changed.is_empty());
    assert!(!outcome.summary.contains('\n'), "summary must be one line");
}

fn assert_success(outcome: &FileOutcome) {
    assert_eq!(outcome.result, ActionResult::Success, "{outcome:#?}");
    assert!(outcome.error.is_none());
    assert!(!outcome.summary.contains('\n'), "summary must be one line");
}

// ---- read_file ----

#[test]
fn read_file_numbers_lines() {
    let f = Fixture::new();
    let out = f.run(parsed(
        "read_file",
        serde_json::json!({"path": "src/lib.rs"}),
    ));
    assert_success(&out);
    let content = out.content.unwrap();
    assert!(
        content.starts_with("   1| fn alpha() {\n   2|     let x = 1;\n"),
        "{content}"
    );
    assert_eq!(content.lines().count(), 8);
    assert!(out.summary.contains("8 lines"), "{}", out.summary);
}

#[test]
fn read_file_line_range() {
    let f = Fixture::new();
    let out = f.run(parsed(
        "read_file",
        serde_json::json!({"path": "src/lib.rs", "start_line": 6, "end_line": 99}),
    ));
    assert_success(&out);
    assert_eq!(
        out.content.unwrap(),
        "   6| fn beta() {\n   7|     let x = 1;\n   8| }\n"
    );
    let out = f.run(parsed(
        "read_file",
        serde_json::json!({"path": "src/lib.rs", "start_line": 20}),
    ));
    assert_failure(&out, "has 8 lines");
}

#[test]
fn read_file_missing_suggests_similar_paths() {
    let f = Fixture::new();
    let out = f.run(parsed("read_file", serde_json::json!({"path": "lib.rs"})));
    assert_failure(&out, "does not exist");
    assert!(out.error.unwrap().contains("`src/lib.rs`"));
    let out = f.run(parsed(
        "read_file",
        serde_json::json!({"path": "nothing.txt"}),
    ));
    assert_failure(&out, "Use search");
}

#[test]
fn read_file_refuses_binary_and_folders() {
    let f = Fixture::new();
    fs::write(f.path("blob.bin"), [0u8, 1, 2, 3]).unwrap();
    assert_failure(
        &f.run(parsed("read_file", serde_json::json!({"path": "blob.bin"}))),
        "binary",
    );
    // Invalid UTF-8 is shown replaced, but not edited (the replacement would be written).
    fs::write(f.path("latin1.txt"), [b'c', b'a', 0xE9]).unwrap();
    let out = f.run(parsed(
        "read_file",
        serde_json::json!({"path": "latin1.txt"}),
    ));
    assert_eq!(out.result, ActionResult::Success, "{out:?}");
    assert!(out.content.unwrap().contains("ca\u{fffd}"));
    assert_failure(
        &f.run(parsed(
            "edit_file",
            serde_json::json!({"path": "latin1.txt", "old_text": "ca", "new_text": "x"}),
        )),
        "UTF-8",
    );
    let out = f.run(parsed("read_file", serde_json::json!({"path": "src"})));
    assert_failure(&out, "is a folder");
    assert!(out.error.unwrap().contains("lib.rs"));
}

#[test]
fn refused_paths_are_failures_not_panics() {
    let f = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "s").unwrap();
    symlink(outside.path(), f.path("out")).unwrap();
    let cases = [
        (
            "read_file",
            serde_json::json!({"path": "/etc/passwd"}),
            "absolute",
        ),
        ("read_file", serde_json::json!({"path": "../x"}), "outside"),
        (
            "read_file",
            serde_json::json!({"path": "out/secret"}),
            "symlink",
        ),
        (
            "read_file",
            serde_json::json!({"path": ".agentforge/state.yaml"}),
            ".agentforge",
        ),
        (
            "write_file",
            serde_json::json!({"path": "out/new.txt", "content": "x"}),
            "outside",
        ),
        (
            "write_file",
            serde_json::json!({"path": ".git/config", "content": "x"}),
            ".git",
        ),
        (
            "edit_file",
            serde_json::json!({"path": "a/../../x", "old_text": "a", "new_text": "b"}),
            "outside",
        ),
        (
            "replace_lines",
            serde_json::json!({"path": ".agentforge/state.yaml", "start_line": 1, "end_line": 1, "new_content": ""}),
            ".agentforge",
        ),
        (
            "search",
            serde_json::json!({"pattern": "x", "path": "../"}),
            "outside",
        ),
    ];
    for (tool, args, needle) in cases {
        let out = f.run(parsed(tool, args));
        assert_failure(&out, needle);
    }
    assert!(!outside.path().join("new.txt").exists());
    assert_eq!(f.read(".agentforge/state.yaml"), "alpha: secret\n");
}

// ---- write_file ----

#[test]
fn write_file_creates_parents_and_overwrites() {
    let f = Fixture::new();
    let out = f.run(parsed(
        "write_file",
        serde_json::json!({"path": "new/deep/mod.rs", "content": "pub fn x() {}\n"}),
    ));
    assert_success(&out);
    assert_eq!(out.files_changed, ["new/deep/mod.rs"]);
    assert_eq!(f.read("new/deep/mod.rs"), "pub fn x() {}\n");
    assert!(out.summary.starts_with("created"), "{}", out.summary);

    let out = f.run(parsed(
        "write_file",
        serde_json::json!({"path": "README.md", "content": "new"}),
    ));
    assert_success(&out);
    assert!(out.summary.starts_with("overwrote"), "{}", out.summary);
    assert_eq!(f.read("README.md"), "new");

    let out = f.run(parsed(
        "write_file",
        serde_json::json!({"path": "README.md", "content": "new"}),
    ));
    assert_success(&out);
    assert!(
        out.files_changed.is_empty(),
        "identical content changes nothing"
    );
}

#[test]
fn write_file_preserves_permissions_and_leaves_no_temp_files() {
    let f = Fixture::new();
    let script = f.path("run.sh");
    fs::write(&script, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o750)).unwrap();
    assert_success(&f.run(parsed(
        "write_file",
        serde_json::json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
    )));
    let mode = fs::metadata(&script).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
    let leftovers: Vec<_> = fs::read_dir(f.ws.root())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("agentforge-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn write_file_onto_folder_fails() {
    let f = Fixture::new();
    assert_failure(
        &f.run(parsed(
            "write_file",
            serde_json::json!({"path": "src", "content": "x"}),
        )),
        "folder",
    );
}

#[test]
fn write_through_inside_symlink_keeps_the_link() {
    let f = Fixture::new();
    symlink("README.md", f.path("alias.md")).unwrap();
    assert_success(&f.run(parsed(
        "write_file",
        serde_json::json!({"path": "alias.md", "content": "via link"}),
    )));
    assert!(fs::symlink_metadata(f.path("alias.md"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(f.read("README.md"), "via link");
}

// ---- edit_file ----

#[test]
fn edit_file_replaces_unique_text() {
    let f = Fixture::new();
    let out = f.run(parsed(
        "edit_file",
        serde_json::json!({"path": "src/lib.rs", "old_text": "    x + 1\n", "new_text": "    x + 2\n    // done\n"}),
    ));
    assert_success(&out);
    assert_eq!(out.files_changed, ["src/lib.rs"]);
    assert!(f.read("src/lib.rs").contains("    x + 2\n    // done\n}"));
    let content = out.content.unwrap();
    assert!(
        content.contains("   3|     x + 2\n   4|     // done\n"),
        "{content}"
    );
    assert!(out.summary.contains("line 3"), "{}", out.summary);
}

#[test]
fn edit_file_ambiguous_match_asks_for_context() {
    let f = Fixture::new();
    let before = f.read("src/lib.rs");
    let out = f.run(parsed(
        "edit_file",
        serde_json::json!({"path": "src/lib.rs", "old_text": "let x = 1;", "new_text": "let x = 2;"}),
    ));
    assert_failure(&out, "occurs 2 times");
    assert!(
        out.error.as_deref().unwrap().contains("lines 2, 7"),
        "{out:?}"
    );
    assert_eq!(f.read("src/lib.rs"), before);
}

#[test]
fn edit_file_not_found_hints() {
    let f = Fixture::new();
    // Wrong indentation: the hint points at the lines and their exact whitespace.
    let out = f.run(parsed(
        "edit_file",
        serde_json::json!({"path": "src/lib.rs", "old_text": "fn alpha() {\nlet x = 1;", "new_text": "y"}),
    ));
    assert_failure(&out, "matches lines 1-2 if indentation is ignored");
    // A near miss: the closest line is shown.
    let out = f.run(parsed(
        "edit_file",
        serde_json::json!({"path": "src/lib.rs", "old_text": "fn betta() {", "new_text": "y"}),
    ));
    assert_failure(&out, "   6| fn beta() {");
    // Line-number prefixes copied from read_file output.
    let out = f.run(parsed(
        "edit_file",
        serde_json::json!({"path": "src/lib.rs", "old_text": "   6| fn beta() {", "new_text": "y"}),
    ));
    assert_failure(&out, "line-number prefixes");
    // Nothing similar at all.
    let out = f.run(parsed(
        "edit_file",
        serde_json::json!({"path": "src/lib.rs", "old_text": "zzzz qqqq", "new_text": "y"}),
    ));
    assert_failure(&out, "read the file first");
    // Missing file.
    let out = f.run(parsed(
        "edit_file",
        serde_json::json!({"path": "nope.rs", "old_text": "a", "new_text": "b"}),
    ));
    assert_failure(&out, "write_file");
}

#[test]
fn edit_file_handles_crlf_files() {
    let f = Fixture::new();
    fs::write(f.path("win.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
    let out = f.run(parsed(
        "edit_file",
        serde_json::json!({"path": "win.txt", "old_text": "one\ntwo\n", "new_text": "1\n2\n"}),
    ));
    assert_success(&out);
    assert_eq!(f.read("win.txt"), "1\r\n2\r\nthree\r\n");
}

// ---- replace_lines ----

#[test]
fn replace_lines_replaces_and_deletes() {
    let f = Fixture::new();
    let out = f.run(parsed(
        "replace_lines",
        serde_json::json!({"path": "src/lib.rs", "start_line": 2, "end_line": 3, "new_content": "    42"}),
    ));
    assert_success(&out);
    assert_eq!(out.files_changed, ["src/lib.rs"]);
    assert!(f
        .read("src/lib.rs")
        .starts_with("fn alpha() {\n    42\n}\n"));
    assert!(out.content.unwrap().contains("   2|     42\n"));

    let out = f.run(parsed(
        "replace_lines",
        serde_json::json!({"path": "src/lib.rs", "start_line": 1, "end_line": 3, "new_content": ""}),
    ));
    assert_success(&out);
    assert!(f.read("src/lib.rs").starts_with("\nfn beta()"));
}

#[test]
fn replace_lines_out_of_range_names_line_count() {
    let f = Fixture::new();
    let out = f.run(parsed(
        "replace_lines",
        serde_json::json!({"path": "README.md", "start_line": 2, "end_line": 5, "new_content": "x"}),
    ));
    assert_failure(&out, "has 2 lines");
    assert_eq!(f.read("README.md"), "# Demo\nalpha and beta\n");
}

#[test]
fn replace_last_line_without_newline() {
    let f = Fixture::new();
    fs::write(f.path("n.txt"), "a\nb").unwrap();
    assert_success(&f.run(parsed(
        "replace_lines",
        serde_json::json!({"path": "n.txt", "start_line": 2, "end_line": 2, "new_content": "c"}),
    )));
    assert_eq!(f.read("n.txt"), "a\nc");
}

// ---- search ----

#[test]
fn search_finds_hits_and_respects_gitignore() {
    let f = Fixture::new();
    fs::write(f.path(".gitignore"), "target/\n").unwrap();
    fs::create_dir_all(f.path("target")).unwrap();
    fs::write(f.path("target/out.rs"), "fn alpha() {}\n").unwrap();
    fs::write(f.path("bin.dat"), b"alpha\0").unwrap();
    let out = f.run(parsed("search", serde_json::json!({"pattern": "alpha"})));
    assert_success(&out);
    let content = out.content.unwrap();
    assert_eq!(
        content,
        "README.md:2: alpha and beta\nsrc/lib.rs:1: fn alpha() {\n"
    );
    assert!(
        out.summary.contains("2 matches in 2 files"),
        "{}",
        out.summary
    );
}

#[test]
fn search_glob_and_path_filters() {
    let f = Fixture::new();
    let out = f.run(parsed(
        "search",
        serde_json::json!({"pattern": "alpha", "glob": "*.rs"}),
    ));
    assert_eq!(out.content.unwrap(), "src/lib.rs:1: fn alpha() {\n");
    let out = f.run(parsed(
        "search",
        serde_json::json!({"pattern": "beta", "path": "src"}),
    ));
    assert_eq!(out.content.unwrap(), "src/lib.rs:6: fn beta() {\n");
    let out = f.run(parsed(
        "search",
        serde_json::json!({"pattern": "beta", "path": "README.md"}),
    ));
    assert_eq!(out.content.unwrap(), "README.md:2: alpha and beta\n");
    let out = f.run(parsed("search", serde_json::json!({"pattern": "zzz"})));
    assert_success(&out);
    assert!(out.summary.contains("no matches"));
    assert_failure(
        &f.run(parsed(
            "search",
            serde_json::json!({"pattern": "x", "path": "nope"}),
        )),
        "does not exist",
    );
    assert_failure(
        &f.run(parsed(
            "search",
            serde_json::json!({"pattern": "x", "glob": "a[b"}),
        )),
        "invalid glob",
    );
}

#[test]
fn search_caps_hits_and_cuts_lines() {
    let f = Fixture::new();
    let long = format!("needle {}\n", "x".repeat(500));
    fs::write(f.path("many.txt"), long.repeat(70)).unwrap();
    let out = f.run(parsed("search", serde_json::json!({"pattern": "needle"})));
    let content = out.content.unwrap();
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 51, "{content}");
    assert!(lines[49].starts_with("many.txt:50: needle"));
    assert!(lines[0].chars().count() <= "many.txt:1: ".len() + 200);
    assert_eq!(
        lines[50],
        "... and 20 more matches (narrow the search with `path` or `glob`)"
    );
}

#[test]
fn search_invalid_regex_names_the_error() {
    let f = Fixture::new();
    let out = f.run(parsed(
        "search",
        serde_json::json!({"pattern": "fn (alpha"}),
    ));
    assert_failure(&out, "unclosed group");
    assert!(out.error.unwrap().contains("fn (alpha"));
}

#[test]
fn search_skips_protected_folders() {
    let f = Fixture::new();
    fs::create_dir_all(f.path(".git")).unwrap();
    fs::write(f.path(".git/config"), "alpha\n").unwrap();
    let out = f.run(parsed(
        "search",
        serde_json::json!({"pattern": "secret|alpha"}),
    ));
    let content = out.content.unwrap();
    assert!(
        !content.contains(".agentforge") && !content.contains(".git/"),
        "{content}"
    );
}

// ---- other actions ----

#[test]
fn non_file_actions_fail_cleanly() {
    let f = Fixture::new();
    for action in [
        Action::RunCheck { name: None },
        Action::Complete { summary: None },
        Action::LoadContext {
            item: agentforge_core::actions::ContextItem::TestOutput,
        },
    ] {
        let out = f.run(action);
        assert_failure(&out, "not a file action");
    }
    assert!(!f.snap("step").exists());
}

// ---- snapshots ----

#[test]
fn snapshot_and_restore_round_trip() {
    let f = Fixture::new();
    let snap = f.snap("step-7");
    let original_lib = f.read("src/lib.rs");
    fs::set_permissions(f.path("README.md"), fs::Permissions::from_mode(0o600)).unwrap();

    let actions = [
        parsed(
            "edit_file",
            serde_json::json!({"path": "src/lib.rs", "old_text": "x + 1", "new_text": "x + 9"}),
        ),
        // A second change to the same file: the snapshot keeps the first original.
        parsed(
            "replace_lines",
            serde_json::json!({"path": "src/lib.rs", "start_line": 1, "end_line": 1, "new_content": "fn gamma() {"}),
        ),
        parsed(
            "write_file",
            serde_json::json!({"path": "README.md", "content": "changed"}),
        ),
        parsed(
            "write_file",
            serde_json::json!({"path": "brand/new/file.txt", "content": "hello"}),
        ),
    ];
    for action in &actions {
        assert_success(&execute_file_action(&f.ws, action, &snap));
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(snap.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_array().unwrap();
    assert_eq!(files.len(), 3, "{manifest:#}");
    assert_eq!(files[0]["path"], "src/lib.rs");
    assert_eq!(files[0]["existed"], true);
    assert_eq!(files[2]["path"], "brand/new/file.txt");
    assert_eq!(files[2]["existed"], false);

    let mut restored = restore_snapshot(&f.ws, &snap).unwrap();
    restored.sort();
    assert_eq!(restored, ["README.md", "brand/new/file.txt", "src/lib.rs"]);
    assert_eq!(f.read("src/lib.rs"), original_lib);
    assert_eq!(f.read("README.md"), "# Demo\nalpha and beta\n");
    let mode = fs::metadata(f.path("README.md"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert!(!f.path("brand/new/file.txt").exists());
    assert!(!f.path("brand").exists(), "created folders are removed");

    // Idempotent.
    let again = restore_snapshot(&f.ws, &snap).unwrap();
    assert_eq!(again.len(), 3);
    assert_eq!(f.read("src/lib.rs"), original_lib);
    assert!(!f.path("brand/new/file.txt").exists());
}

#[test]
fn restore_without_snapshot_restores_nothing() {
    let f = Fixture::new();
    assert!(restore_snapshot(&f.ws, &f.snap("never"))
        .unwrap()
        .is_empty());
    // Reads do not snapshot anything.
    let snap = f.snap("read");
    execute_file_action(
        &f.ws,
        &parsed("read_file", serde_json::json!({"path": "README.md"})),
        &snap,
    );
    assert!(restore_snapshot(&f.ws, &snap).unwrap().is_empty());
}

#[test]
fn restore_keeps_folders_with_other_files() {
    let f = Fixture::new();
    let snap = f.snap("s");
    assert_success(&execute_file_action(
        &f.ws,
        &parsed(
            "write_file",
            serde_json::json!({"path": "gen/a.txt", "content": "a"}),
        ),
        &snap,
    ));
    fs::write(f.path("gen/other.txt"), "not ours").unwrap();
    restore_snapshot(&f.ws, &snap).unwrap();
    assert!(!f.path("gen/a.txt").exists());
    assert_eq!(f.read("gen/other.txt"), "not ours");
}

#[test]
fn corrupt_manifest_is_an_error() {
    let f = Fixture::new();
    let snap = f.snap("bad");
    fs::create_dir_all(&snap).unwrap();
    fs::write(snap.join("manifest.json"), "{not json").unwrap();
    assert!(matches!(
        restore_snapshot(&f.ws, &snap),
        Err(ToolError::Snapshot { .. })
    ));
}

#[test]
fn manifest_paths_are_confined_on_restore() {
    let f = Fixture::new();
    let snap = f.snap("evil");
    fs::create_dir_all(&snap).unwrap();
    // Unique per test run: the workspace's parent is the shared temp folder.
    let name = format!(
        "{}-victim.txt",
        f.ws.root().file_name().unwrap().to_string_lossy()
    );
    let target = f.ws.root().parent().unwrap().join(&name);
    fs::write(&target, "keep").unwrap();
    let manifest = serde_json::json!({
        "version": 1,
        "files": [{"path": format!("../{name}"), "existed": false}],
    });
    fs::write(snap.join("manifest.json"), manifest.to_string()).unwrap();
    assert!(matches!(
        restore_snapshot(&f.ws, &snap),
        Err(ToolError::Refused { .. })
    ));
    assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
    fs::remove_file(target).unwrap();
}

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn fifos_are_never_opened_for_reading_or_replaced() {
    let f = Fixture::new();
    mkfifo(&f.path("pipe"));
    for action in [
        parsed("read_file", serde_json::json!({"path": "pipe"})),
        parsed(
            "edit_file",
            serde_json::json!({"path": "pipe", "old_text": "a", "new_text": "b"}),
        ),
        parsed(
            "replace_lines",
            serde_json::json!({"path": "pipe", "start_line": 1, "end_line": 1, "new_content": "b"}),
        ),
        parsed(
            "write_file",
            serde_json::json!({"path": "pipe", "content": "b"}),
        ),
    ] {
        assert_failure(&f.run(action), "FIFO");
    }
    // search walks past it.
    let out = f.run(parsed("search", serde_json::json!({"pattern": "alpha"})));
    assert_eq!(out.result, ActionResult::Success, "{out:?}");
    assert!(f.path("pipe").exists());
}

#[test]
fn files_over_the_cap_are_refused_by_file_actions() {
    let f = Fixture::new();
    fs::File::create(f.path("huge.txt"))
        .unwrap()
        .set_len(super::files::MAX_TEXT_FILE_BYTES + 1)
        .unwrap();
    assert_failure(
        &f.run(parsed("read_file", serde_json::json!({"path": "huge.txt"}))),
        "larger than",
    );
}

#[test]
fn protected_paths_refuse_writes_however_spelled_but_stay_readable() {
    let mut f = Fixture::new();
    fs::write(f.path("agentforge.toml"), "[limits]\n").unwrap();
    fs::create_dir_all(f.path("plugins/p")).unwrap();
    fs::write(f.path("plugins/p/plugin.toml"), "name = 'p'\n").unwrap();
    symlink("agentforge.toml", f.path("alias.toml")).unwrap();
    f.ws.protect(std::path::Path::new("agentforge.toml"), "the config");
    f.ws.protect(&f.path("plugins"), "a plugin folder");
    f.ws.protect(std::path::Path::new("prompts"), "the prompts folder");
    f.ws.protect_globs(&["*.lock".to_string(), "vendor".to_string()])
        .unwrap();
    for (path, why) in [
        ("agentforge.toml", "the config"),
        ("./agentforge.toml", "the config"),
        ("src/../agentforge.toml", "the config"),
        ("AGENTFORGE.toml", "the config"),
        ("alias.toml", "the config"),
        ("plugins/p/plugin.toml", "a plugin folder"),
        ("plugins/new.wasm", "a plugin folder"),
        ("prompts/analyze.j2", "the prompts folder"),
        ("Cargo.lock", "`*.lock`"),
        ("vendor/x/y.rs", "`vendor`"),
    ] {
        let out = f.run(parsed(
            "write_file",
            serde_json::json!({"path": path, "content": "pwned"}),
        ));
        assert_failure(&out, why);
        assert_failure(&out, "is protected");
    }
    assert_failure(
        &f.run(parsed(
            "edit_file",
            serde_json::json!({"path": "alias.toml", "old_text": "[limits]", "new_text": "x"}),
        )),
        "is protected",
    );
    assert_eq!(f.read("agentforge.toml"), "[limits]\n");
    assert!(!f.path("prompts").exists() && !f.path("vendor").exists());
    // Reading them is fine, and files merely named alike are writable.
    let out = f.run(parsed(
        "read_file",
        serde_json::json!({"path": "agentforge.toml"}),
    ));
    assert_eq!(out.result, ActionResult::Success, "{out:?}");
    let out = f.run(parsed(
        "write_file",
        serde_json::json!({"path": "src/agentforge.toml.md", "content": "ok"}),
    ));
    assert_eq!(out.result, ActionResult::Success, "{out:?}");
    assert!(f.ws.protect_globs(&["a[".to_string()]).is_err());
}
